"""Write the built-in model's Hub model card from its docs page.

    python tools/sync_model_card.py      # rewrites assets/models/diffusiongemma-tiny-demo/README.md

The card is docs/builtin-model.md in the Hub's form: YAML metadata (kept from the card as it is), a
title, then the part of the docs page between the model-card markers.  That part links nothing
relative, so it reads the same on GitHub and on the Hub, where the model folder is a repository of
its own.  tests/test_docs.py fails when the two drift apart.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS_PAGE = ROOT / "docs" / "builtin-model.md"
CARD = ROOT / "assets" / "models" / "diffusiongemma-tiny-demo" / "README.md"
START, END = "<!-- model-card:start -->", "<!-- model-card:end -->"
TITLE = "# diffusiongemma-tiny-demo"


def card_body(page: str) -> str:
    """The docs page's shared part, without the markers."""
    return page.split(START, 1)[1].split(END, 1)[0].strip() + "\n"


def front_matter(card: str) -> str:
    """The card's leading `---` YAML block, delimiters included."""
    if not card.startswith("---\n"):
        raise SystemExit(f"{CARD} lost its YAML front matter")
    return card[: card.index("\n---\n", 4) + len("\n---\n")]


def card_text(card: str, page: str) -> str:
    return f"{front_matter(card)}\n{TITLE}\n\n{card_body(page)}"


if __name__ == "__main__":
    CARD.write_text(card_text(CARD.read_text(), DOCS_PAGE.read_text()))
    print(f"wrote {CARD.relative_to(ROOT)}")
