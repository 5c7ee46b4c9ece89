"""Interning of string columns (interning.Interner): codes in order of first appearance."""

from __future__ import annotations

import numpy as np

from tb_plugin.ingest.interning import Interner, id_string, json_repr


def test_codes_follow_first_appearance_whatever_the_batches():
    whole, parts = Interner(missing_as=""), Interner(missing_as="")
    values = ["b", None, "a", "b", "c", "a"]
    codes = whole.codes(values)
    assert whole.categories == ["", "b", "a", "c"]  # the missing value is interned first
    assert codes.tolist() == [1, 0, 2, 1, 3, 2]
    assert np.concatenate([parts.codes(values[:2]), parts.codes(values[2:])]).tolist() == \
        codes.tolist()
    assert parts.categories == whole.categories


def test_missing_values_without_a_name_are_minus_one():
    interner = Interner(normalize=json_repr)
    codes = interner.codes([b"", b"[[2, 3], []]", None, b"[]"])
    assert codes.tolist() == [-1, 0, -1, 1]
    assert interner.categories == ["[[2, 3], []]", "[]"]
    assert Interner().codes([float("nan"), "x"]).tolist() == [-1, 0]


def test_ids_are_normalised_once_per_raw_value():
    interner = Interner(normalize=id_string, missing_as="")
    assert interner.codes([7, 7.0, "7", "stream 7", 7]).tolist() == [1, 1, 1, 2, 1]
    assert interner.categories == ["", "7", "stream 7"]


def test_unhashable_values_are_interned_by_their_text():
    interner = Interner(missing_as="")
    assert interner.codes(["a", ["x"], ["x"], "a"]).tolist() == [1, 2, 2, 1]
    assert interner.categories == ["", "a", "['x']"]


def test_merge_appends_new_categories_and_maps_missing():
    first, second = Interner(missing_as=""), Interner(missing_as="")
    first.codes(["a", "b"])
    second_codes = second.codes(["c", "a", None])
    lut = first.merge(second.categories)
    assert first.categories == ["", "a", "b", "c"]
    assert [first.categories[c] for c in lut[second_codes]] == ["c", "a", ""]
    assert lut[-1] == -1
