"""The YAML schema checker shared by profiles and runtime descriptors."""

from __future__ import annotations

import pytest

from edgeaccel.errors import ConfigError
from edgeaccel.schema import Field, load_yaml, validate


def test_a_key_given_twice_is_an_error_with_its_line(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("name: a\nthermal: {passive_c: 80}\nthermal: {passive_c: 90}\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert str(path) in str(info.value) and "line 3" in str(info.value) and "duplicate key 'thermal'" in str(info.value)


def test_bad_yaml_names_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: a\nmatch: [x86_64\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert "is not valid YAML at line" in str(info.value) and "column" in str(info.value)


@pytest.mark.parametrize("value, ok", [(0, True), (150, True), (151, False), (-41, False)])
def test_numbers_are_bounded_both_ways(value, ok):
    schema = {"t": Field(float, minimum=-40, maximum=150)}
    if ok:
        validate({"t": value}, schema, "f.yaml")
    else:
        with pytest.raises(ConfigError, match=r"f\.yaml:t: .*(above the maximum|below the minimum)"):
            validate({"t": value}, schema, "f.yaml")
