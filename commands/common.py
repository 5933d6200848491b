"""What the commands share: paths, the family option type, the int-list option parser."""

from __future__ import annotations

from pathlib import Path

import click

from tuner.families import names as family_names

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "indexer_logits" / "tables"
DB_DIR = ROOT / "db"


class FamilyChoice(click.Choice):
    """The registered kernel families (tuner.families), read when an option is parsed, so a
    family registered after this module was imported is a valid choice too."""

    def __init__(self, extra: tuple[str, ...] = ()):
        self.extra = tuple(extra)
        super().__init__(self.choices)

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(family_names()) + self.extra

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ assigns it
        pass


def int_list(option: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated positive ints, got {text!r}", param_hint=option) from None
    if not values or any(v < 1 for v in values):
        raise click.BadParameter(f"expected comma-separated positive ints, got {text!r}", param_hint=option)
    return values
