"""`python -m webapp`: the same as `python app.py`."""

from webapp.serve import main

main()
