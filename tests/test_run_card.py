"""The run card and the "reproduce this run" lines (webapp/run_card.py)."""

import inspect
import shlex
from pathlib import Path


from cli.common import settings_from_args
from cli.main import build_parser
from visualizer.trace import Trace
from webapp.run_card import cli_line, client_call, run_card_html, trace_card

PALINDROME = Path(__file__).parent.parent / "assets" / "traces" / "palindrome.json"
ASKED = {"seed": 7, "sampler": "entropy-bound", "max_denoising_steps": 12, "temperature": 0.5, "thinking": True,
         "pins": ((14, "ocean"), (40, "moon")), "layers": (0, 2)}


def test_the_card_of_a_loaded_trace_says_its_prompt_model_and_seed():
    card = trace_card(Trace.load(PALINDROME))
    assert "is_palindrome" in card and "Built-in small model" in card and "seed 0" in card


def test_the_card_escapes_a_visitors_text_and_says_the_changed_knobs():
    card = run_card_html("<script>x</script>", "m", ASKED)
    assert "<script>" not in card and "&lt;script&gt;" in card
    assert "temperature 0.5" in card and "pins: 14=ocean; 40=moon" in card and "layers: 0,2" in card


def test_the_cli_line_parsed_by_records_parser_gives_back_the_knobs():
    line = cli_line("Why is the sky blue?", "some/model", ASKED)
    args = build_parser().parse_args(shlex.split(line)[3:])
    settings = settings_from_args(args)
    assert args.prompt == "Why is the sky blue?" and args.model == "some/model"
    for name, value in ASKED.items():
        assert getattr(settings, name) == value, name


def test_the_client_calls_keywords_are_the_generate_apis_parameters():
    from webapp.app import Handlers, _naming_knobs
    from webapp.hosting import Hosting

    names = set(inspect.signature(_naming_knobs(Handlers(Hosting.from_environment()).generate)).parameters)
    call = client_call("p", "m", ASKED).splitlines()[-1]
    keywords = {part.split("=")[0].strip() for part in call.split(", ") if "=" in part and "api_name" not in part}
    assert keywords and keywords <= names


def test_the_compare_panes_show_each_sides_card_and_keep_a_when_b_is_pinned():
    from webapp.compare_runs import compare_note, pin_run
    from webapp.sessions import RunSession

    session = RunSession()
    session.trace = Trace.load(PALINDROME)
    pin_run(0, "standard", "grid", session)
    only_a = compare_note(session)
    assert only_a.count('class="dv-run-card"') == 1 and "not chosen yet" in only_a and "is_palindrome" in only_a
    story = Trace.load(PALINDROME.with_name("story.json"))
    session.trace = story
    both = pin_run(1, "standard", "grid", session)["compare_note"]
    assert both.count('class="dv-run-card"') == 2 and "not chosen yet" not in both
    assert both.index("is_palindrome") < both.index("Run B:") < both.index("100-word story")  # A's card stays first
