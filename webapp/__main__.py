"""`python -m webapp`: the same as `python app.py`."""

from webapp.app import main

main()
