"""only_present (service/state/present.py): what the loop keeps per container, narrowed to the
containers a sweep still lists; nothing built while none is to be dropped."""

from __future__ import annotations

from guardian.service.state.present import only_present


def test_the_absent_are_dropped_and_the_present_kept_with_their_values() -> None:
    entries = {"a": 1, "gone": 2, "b": 3}
    assert only_present(entries, {"a", "b", "c"}) == {"a": 1, "b": 3}
    assert entries == {"a": 1, "gone": 2, "b": 3}  # the caller's dict is not changed


def test_with_none_to_drop_the_very_dict_is_handed_back() -> None:
    entries = {"a": 1, "b": 2}
    assert only_present(entries, {"a", "b", "c"}) is entries
    assert only_present({}, set()) == {}
