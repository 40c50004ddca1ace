"""What a controlled-document template is: fixed paragraphs with ``{slot}`` placeholders, the slots' value pools, and
one question per fact slot.

A template renders every document of its kind with the same paragraphs in the same order; only the slot values
differ. ``{entity}`` (the entity's name) may appear in the first paragraph only. Slot kinds:

* :class:`Year`, :class:`Number`: drawn **without replacement** per template (no two documents of a template share
  the value), so a value, and hence an answer, never repeats across the documents of a template; with
  ``unique=False`` drawn with replacement instead (filler, never asked about);
* :class:`Later`: a year some years after another year slot of the same document (filler: the order of events
  stays plausible);
* :class:`Name`: invented words (:mod:`curation.sources.controlled.names`) in a form such as ``"{W} Steelworks"``
  or ``"{first} {W}"`` (``{first}``: a first name of :data:`FIRST_NAMES`); unique across the corpus by their words;
* :class:`Choice`: filler drawn with replacement (a month, a colour, a direction); never asked about;
* ``{he}``, ``{He}``, ``{his}``, ``{His}``, ``{him}``: pronouns of a person template (one gender per document).

Rules checked by :meth:`Template.check` (a template that breaks one is a bug, reported with its name): 8 to 12
paragraphs without line breaks; no digit in the fixed prose or the choices (so a number can only come from its slot
and occurs once); every placeholder known and every slot used; each asked slot unique-valued, placed exactly once;
6 to 10 questions, each naming ``{entity}`` once and no other slot, at least one about the first paragraph.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

PLACEHOLDER = re.compile(r"\{(\w+)\}")
ENTITY = "entity"
PRONOUNS = {
    "he": ("he", "she"),
    "He": ("He", "She"),
    "his": ("his", "her"),
    "His": ("His", "Her"),
    "him": ("him", "her"),
}
"""Pronoun placeholders of a person template: (masculine, feminine) forms."""
PARAGRAPHS = (8, 12)
QUESTIONS = (6, 10)
MAX_PARAGRAPH_CHARS = 950  # under the 1000-character chunk, so a paragraph (and its answers) is never cut
FIRST_NAMES = (
    *("Anna", "Clara", "Edith", "Greta", "Helena", "Ines", "Johanna", "Lucia", "Marta", "Nora", "Paula", "Rosa"),
    *("Albert", "Bruno", "Carl", "Daniel", "Emil", "Felix", "Georg", "Henrik", "Jonas", "Lukas", "Oskar", "Victor"),
)
"""First names of invented people named in facts (their surnames are invented words)."""


@dataclass(frozen=True)
class Year:
    """A year in ``lo..hi``, unique per template."""

    lo: int
    hi: int
    unique: bool = True

    def pool(self) -> list[str]:
        return [str(year) for year in range(self.lo, self.hi + 1)]


@dataclass(frozen=True)
class Number:
    """``lo..hi`` by ``step`` in units of ``10**-decimals``, written with thousands commas and ``unit``; unique."""

    lo: int
    hi: int
    step: int = 1
    decimals: int = 0
    unit: str = ""
    unique: bool = True

    def pool(self) -> list[str]:
        scale = 10**self.decimals
        return [f"{value / scale:,.{self.decimals}f}{self.unit}" for value in range(self.lo, self.hi + 1, self.step)]


@dataclass(frozen=True)
class Name:
    """An invented name in one of ``forms``: ``{W}`` is a new invented word, ``{first}`` a first name."""

    forms: tuple[str, ...]
    unique = True


@dataclass(frozen=True)
class Choice:
    """Filler drawn with replacement from ``options`` (never asked about)."""

    options: tuple[str, ...]
    unique = False


@dataclass(frozen=True)
class Later:
    """The year of slot ``after`` (a year or another later year) plus ``lo..hi`` years (filler, never asked about)."""

    after: str
    lo: int
    hi: int
    unique = False

    def pool(self, base: str) -> list[str]:
        return [str(int(base) + offset) for offset in range(self.lo, self.hi + 1)]


Slot = Year | Number | Name | Choice | Later


@dataclass(frozen=True)
class Template:
    """One kind of document (module docstring). ``noun``: what uninformative titles call it ("City profile 3")."""

    name: str
    domain: str
    noun: str
    entity: Name
    paragraphs: tuple[str, ...]
    slots: Mapping[str, Slot]
    questions: Mapping[str, str]
    person: bool = False
    description: str = field(default="", compare=False)

    def placeholders(self, paragraph: str) -> list[str]:
        return PLACEHOLDER.findall(paragraph)

    def slot_order(self) -> list[str]:
        """The slots in order of first appearance in the paragraphs."""
        order: dict[str, None] = {}
        for paragraph in self.paragraphs:
            order.update((name, None) for name in self.placeholders(paragraph) if name in self.slots)
        return list(order)

    def check(self) -> None:
        """Raise ``ValueError`` naming the template and the rule it breaks (module docstring)."""
        problems = list(self._problems())
        if problems:
            raise ValueError(f"controlled template '{self.name}': " + "; ".join(problems))

    def _problems(self) -> Iterator[str]:
        low, high = PARAGRAPHS
        if not low <= len(self.paragraphs) <= high:
            yield f"{len(self.paragraphs)} paragraphs (needs {low} to {high})"
        known = {ENTITY, *self.slots, *(PRONOUNS if self.person else ())}
        counts: dict[str, int] = {}
        for index, paragraph in enumerate(self.paragraphs):
            if "\n" in paragraph or paragraph != paragraph.strip() or re.search(r"  | [,.;:]", paragraph):
                yield f"paragraph {index + 1} has a line break, a double space or a space before punctuation"
            names = self.placeholders(paragraph)
            for name in names:
                counts[name] = counts.get(name, 0) + 1
            if unknown := sorted(set(names) - known):
                yield f"paragraph {index + 1}: unknown placeholders {unknown}"
            if index > 0 and ENTITY in names:
                yield f"paragraph {index + 1} names {{entity}} (only the first paragraph may)"
            if re.search(r"\d", PLACEHOLDER.sub("", paragraph)):
                yield f"paragraph {index + 1} has a digit in its fixed text"
        if ENTITY not in self.placeholders(self.paragraphs[0]):
            yield "the first paragraph does not name {entity}"
        if unused := sorted(set(self.slots) - set(counts)):
            yield f"slots never placed: {unused}"
        order = self.slot_order()
        for name, slot in self.slots.items():
            if isinstance(slot, Choice) and any(re.search(r"\d", option) for option in slot.options):
                yield f"choice slot '{name}' has a digit"
            if isinstance(slot, Later) and (
                not isinstance(self.slots.get(slot.after), Year | Later)
                or name not in order
                or slot.after not in order
                or order.index(slot.after) > order.index(name)
            ):
                yield f"slot '{name}' follows '{slot.after}', which is not a year slot placed before it"
        low, high = QUESTIONS
        if not low <= len(self.questions) <= high:
            yield f"{len(self.questions)} questions (needs {low} to {high})"
        head = set(self.placeholders(self.paragraphs[0]))
        if not head & set(self.questions):
            yield "no question is answered in the first paragraph (the control)"
        for name, question in self.questions.items():
            asked = self.slots.get(name)
            if asked is None or not asked.unique:
                yield f"question '{name}' asks about a slot that is missing or not unique-valued"
            elif counts.get(name) != 1:
                yield f"question '{name}': its slot is placed {counts.get(name, 0)} times (needs exactly 1)"
            if self.placeholders(question) != [ENTITY]:
                yield f"question '{name}' must hold {{entity}} once and no other placeholder"


MONTHS = Choice(
    (
        *("January", "February", "March", "April", "May", "June"),
        *("July", "August", "September", "October", "November", "December"),
    )
)
FEW = Choice(("two", "three", "four", "five", "six"))
SEVERAL = Choice(("five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"))
MANY = Choice(("fourteen", "sixteen", "eighteen", "twenty", "twenty-two", "twenty-five", "thirty"))
PERSON = Name(("{first} {W}",))
PLACE = Name(("{W}",))
