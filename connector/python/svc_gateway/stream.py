"""Streamed answers: hold tool-call frames back, decide, then release only what was allowed.

Frames before the first tool-call delta pass at once. From the first tool-call
delta on, every frame is held until the stream ends, when every call's name and
arguments are complete. The held frames are then released in their original
order, with a refused call's deltas taken out (its name and arguments are never
emitted) and the remaining calls of a choice renumbered from 0. A choice left
without calls ends with ``finish_reason: stop`` and the refusal payload as content.
"""

from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any, Hashable

from .calls import LEGACY_CALL_ID, LEGACY_SLOT, field, name_and_arguments
from .foreign import carries_tool_call
from .verdicts import ToolCall, Verdict, refusal_payload


@dataclass
class _Slot:
    """One tool call being reassembled from its deltas."""

    choice: int
    order: int
    id: str = ""
    name: str = ""
    arguments: str = ""
    legacy: bool = False


@dataclass
class _Held:
    """A held frame and, per position in its ``choices``, the slot of each tool-call delta."""

    chunk: Any
    slots: dict[int, list[_Slot]] = dc_field(default_factory=dict)
    legacy: dict[int, _Slot] = dc_field(default_factory=dict)


class StreamHold:
    """The frames of one stream from its first tool-call delta on, and the calls they assemble."""

    def __init__(self) -> None:
        self.holding = False
        self.foreign = False
        self._held: list[_Held] = []
        self._slots: dict[int, list[_Slot]] = {}
        self._open: dict[tuple[int, Hashable], _Slot] = {}
        self._template: Any = None

    def feed(self, chunk: Any) -> bool:
        """Take one frame; True when it may be emitted now, False when it is held."""
        choices = field(chunk, "choices")
        if not isinstance(choices, list):
            # Not a chat-completion frame: a tool call in it cannot be removed alone.
            if carries_tool_call(chunk):
                self.foreign = self.holding = True
            if self.holding:
                self._held.append(_Held(chunk))
            return not self.holding
        if self._template is None:
            self._template = chunk
        held = _Held(chunk)
        for pos, choice in enumerate(choices):
            self._read_choice(held, pos, choice)
        if held.slots or held.legacy:
            self.holding = True
        if self.holding:
            self._held.append(held)
        return not self.holding

    @property
    def sample(self) -> Any:
        """The first chat-completion frame seen: its model and hidden params describe the deployment."""
        return self._template

    def calls(self) -> list[ToolCall]:
        """Every reassembled call, in choice order then in the order the calls started."""
        return [
            ToolCall(LEGACY_CALL_ID if s.legacy else s.id, s.name, s.arguments, s.choice, LEGACY_SLOT if s.legacy else s.order)
            for choice in sorted(self._slots)
            for s in self._slots[choice]
        ]

    def release(self, verdicts: list[Verdict]) -> list[Any]:
        """The held frames to emit, given one verdict per call of ``calls()``."""
        slots = [s for choice in sorted(self._slots) for s in self._slots[choice]]
        if len(verdicts) != len(slots):
            raise ValueError(f"{len(verdicts)} verdicts for {len(slots)} held tool calls")
        verdict_of = {id(s): v for s, v in zip(slots, verdicts)}
        refused_choices = {
            choice: [verdict_of[id(s)].refusal or {} for s in group]
            for choice, group in self._slots.items()
            if not any(verdict_of[id(s)].release for s in group)
        }
        renumber = self._renumber(verdict_of)
        out: list[Any] = []
        closed: set[int] = set()
        for held in self._held:
            closing = self._rewrite(held, verdict_of, renumber, refused_choices)
            if not _is_empty(held.chunk) or not (held.slots or held.legacy or closing):
                out.append(held.chunk)
            for choice in closing:
                out.append(self.closing_frame(choice, refused_choices[choice]))
                closed.add(choice)
        for choice in sorted(set(refused_choices) - closed):
            out.append(self.closing_frame(choice, refused_choices[choice]))
        return out

    def choices_with_calls(self) -> list[int]:
        """The choices that produced at least one tool-call delta."""
        return sorted(self._slots)

    def closing_frame(self, choice: int, refusals: list[dict[str, Any]]) -> Any:
        """A final frame for ``choice``: the refusal payload as content, ``finish_reason: stop``."""
        from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices

        template = self._template
        frame = ModelResponseStream(
            id=field(template, "id"),
            created=field(template, "created"),
            model=field(template, "model"),
            choices=[StreamingChoices(index=choice, delta=Delta(content=refusal_payload(refusals)), finish_reason="stop")],
        )
        hidden = getattr(template, "_hidden_params", None)
        if isinstance(hidden, dict):
            frame._hidden_params = dict(hidden)
        return frame

    def _read_choice(self, held: _Held, pos: int, choice: Any) -> None:
        number = field(choice, "index")
        number = number if isinstance(number, int) else pos
        delta = field(choice, "delta")
        deltas = field(delta, "tool_calls") or []
        if deltas:
            held.slots[pos] = [self._slot_for(number, tc) for tc in deltas]
        legacy = field(delta, "function_call")
        if legacy is not None:
            held.legacy[pos] = self._legacy_slot(number, legacy)

    def _slot_for(self, choice: int, tool_call: Any) -> _Slot:
        index = field(tool_call, "index")
        key = (choice, index if isinstance(index, int) else 0)
        call_id = field(tool_call, "id")
        slot = self._open.get(key)
        if slot is None or (isinstance(call_id, str) and call_id and slot.id and call_id != slot.id):
            # A new index, or a provider reusing an index for the next call (a new id).
            slot = self._new_slot(choice)
            self._open[key] = slot
        if isinstance(call_id, str) and call_id and not slot.id:
            slot.id = call_id
        name, arguments = name_and_arguments(tool_call)
        slot.name += name
        slot.arguments += arguments
        return slot

    def _legacy_slot(self, choice: int, function_call: Any) -> _Slot:
        key = (choice, "function_call")
        slot = self._open.get(key)
        if slot is None:
            slot = self._new_slot(choice)
            slot.legacy = True
            self._open[key] = slot
        name, arguments = name_and_arguments({"function": function_call})
        slot.name += name
        slot.arguments += arguments
        return slot

    def _new_slot(self, choice: int) -> _Slot:
        group = self._slots.setdefault(choice, [])
        slot = _Slot(choice=choice, order=len(group))
        group.append(slot)
        return slot

    def _renumber(self, verdict_of: dict[int, Verdict]) -> dict[int, int]:
        renumber: dict[int, int] = {}
        for group in self._slots.values():
            kept = [s for s in group if not s.legacy and verdict_of[id(s)].release]
            renumber.update({id(s): n for n, s in enumerate(kept)})
        return renumber

    def _rewrite(
        self,
        held: _Held,
        verdict_of: dict[int, Verdict],
        renumber: dict[int, int],
        refused_choices: dict[int, list[dict[str, Any]]],
    ) -> list[int]:
        """Strip refused deltas from one held frame; return the choices whose finish moves to a closing frame."""
        closing: list[int] = []
        for pos, choice in enumerate(field(held.chunk, "choices") or []):
            delta = field(choice, "delta")
            if pos in held.slots:
                kept = []
                for tool_call, slot in zip(field(delta, "tool_calls") or [], held.slots[pos]):
                    if verdict_of[id(slot)].release:
                        _set(tool_call, "index", renumber[id(slot)])
                        kept.append(tool_call)
                _set(delta, "tool_calls", kept or None)
            if pos in held.legacy and not verdict_of[id(held.legacy[pos])].release:
                _set(delta, "function_call", None)
            number = field(choice, "index")
            number = number if isinstance(number, int) else pos
            if number in refused_choices and field(choice, "finish_reason"):
                _set(choice, "finish_reason", None)
                closing.append(number)
        return closing


def _is_empty(chunk: Any) -> bool:
    """True when a frame says nothing any more: no usage and only blank deltas without a finish."""
    if field(chunk, "usage") is not None:
        return False
    for choice in field(chunk, "choices") or []:
        if field(choice, "finish_reason"):
            return False
        delta = field(choice, "delta")
        for name in ("content", "tool_calls", "function_call", "reasoning_content", "role"):
            if field(delta, name):
                return False
    return True


def _set(obj: Any, name: str, value: Any) -> None:
    if isinstance(obj, dict):
        obj[name] = value
    else:
        setattr(obj, name, value)
