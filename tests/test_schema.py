"""The table declaration primitive (tb_plugin/schema.py): a frame is built to its declaration
or refused with the table and column named."""

import numpy as np
import pandas as pd
import pytest

from tb_plugin import schema
from tb_plugin.schema import Column, SchemaError, Table, documented

SAMPLE = Table("sample", "one row per thing", (
    Column("name", "str", "", "what the thing is called"),
    Column("calls", "int64", "count", "how often it ran"),
    Column("total_us", "float64", "us", "its summed duration"),
    Column("flagged", "bool", "", "whether it is flagged"),
))


def test_frame_orders_columns_drops_extras_and_widens_ints():
    frame = SAMPLE.frame({"flagged": [True, False], "total_us": [3, 4], "calls": np.array([1, 2], np.int32),
                          "name": ["a", "b"], "scratch": [0, 0]})
    assert list(frame.columns) == ["name", "calls", "total_us", "flagged"]
    assert frame["calls"].dtype == np.int64 and frame["total_us"].dtype == np.float64
    assert frame["total_us"].tolist() == [3.0, 4.0]
    SAMPLE.check(frame)


def test_frame_refuses_a_missing_column_naming_it():
    with pytest.raises(SchemaError, match=r"'sample'.*\['flagged'\]"):
        SAMPLE.frame({"name": ["a"], "calls": [1], "total_us": [1.0]})


def test_frame_refuses_text_in_a_number_column():
    with pytest.raises(SchemaError, match="total_us"):
        SAMPLE.frame({"name": ["a"], "calls": [1], "total_us": ["x"], "flagged": [True]})


def test_frame_refuses_floats_in_an_int_column():
    with pytest.raises(SchemaError, match="calls"):
        SAMPLE.frame({"name": ["a"], "calls": [1.5], "total_us": [1.0], "flagged": [True]})


def test_empty_frame_has_declared_dtypes():
    frame = SAMPLE.frame(pd.DataFrame({n: [] for n in SAMPLE.names}))
    SAMPLE.check(frame)
    assert len(frame) == 0


def test_empty_equals_an_empty_frame_for_every_declared_table():
    # `empty` builds its columns directly (no conversion); it must be exactly what `frame`
    # makes of no rows, nullable and int32 columns included, for every table a view answers
    import tb_plugin.python_api.profile  # noqa: F401  (declares the tables of the views a load needs)
    from tb_plugin.views import (collectives, compiled, copies, critical_path, cudagraphs, diff, distributed, flops,  # noqa: F401
                                 gpu_annotations, job, lightning, memory, modules, queues, rank_timeline, regression,
                                 sequences, timeline)

    assert len(schema.TABLES) > 100
    for table in schema.TABLES.values():
        empty = table.empty()
        table.check(empty)
        pd.testing.assert_frame_equal(empty, table.frame({name: [] for name in table.names}))
    assert SAMPLE.empty()["name"].dtype == object  # not pandas 3's Arrow strings


def test_check_names_a_wrong_dtype():
    frame = pd.DataFrame({"name": ["a"], "calls": [1.0], "total_us": [1.0], "flagged": [True]})
    with pytest.raises(SchemaError, match="calls"):
        SAMPLE.check(frame)


def test_columns_are_validated_when_declared():
    with pytest.raises(ValueError, match="dtype"):
        Column("x", "double", "", "bad dtype")
    with pytest.raises(ValueError, match="unit"):
        Column("x", "float64", "seconds", "bad unit")
    with pytest.raises(ValueError, match="twice"):
        Table("t", "d", (Column("x", "int64", "", "a"), Column("x", "int64", "", "b")))


def test_doc_lines_read_as_a_returns_section():
    assert SAMPLE.doc_lines()[2] == "total_us (float64, us): its summed duration"


def test_nullable_only_for_columns_that_can_hold_null():
    assert Column("x", "float64", "us", "may be unknown", nullable=True).nullable
    assert Column("t", "str", "", "may be absent", True).json_type == "string"
    with pytest.raises(ValueError, match="null"):
        Column("n", "int32", "", "ids use -1 instead", nullable=True)
    with pytest.raises(ValueError, match="null"):
        Column("b", "bool", "", "flags use False instead", nullable=True)
    assert Column("size_bytes", "int64", "bytes", "a size that may be unknown", nullable=True).nullable
    assert Table("t", "d", (Column("a", "float64", "", "x", True),)).doc_lines() == ["a (float64, nullable): x"]


def test_int32_columns_are_kept_compact():
    table = Table("compact", "d", (Column("depth", "int32", "", "nesting depth"),))
    frame = table.frame({"depth": np.array([0, 1], np.int64)})
    assert frame["depth"].dtype == np.int32 and table.column("depth").json_type == "integer"
    table.check(frame)


def test_documented_writes_the_columns_into_the_returns_section():
    @documented(SAMPLE)
    def view():
        """Things per name.

        Returns
        -------
        DataFrame sorted by calls.

        Notes
        -----
        How it is counted.
        """

    doc = view.__doc__
    lines = doc.splitlines()
    assert lines[:5] == ["Things per name.", "", "Returns", "-------", "DataFrame sorted by calls."]
    assert "``sample`` -- one row per thing" in lines
    assert doc.index("- total_us (float64, us): its summed duration") < doc.index("Notes")
    assert view.tables == (SAMPLE,)

    @documented(SAMPLE)
    def bare():
        """Only a summary."""

    assert bare.__doc__.splitlines()[2:4] == ["Returns", "-------"]


def test_nullable_whole_numbers_are_held_as_int64_with_na():
    table = Table("sizes", "one thing", (Column("size_bytes", "int64", "bytes", "its size", True),))
    frame = table.frame({"size_bytes": [1.0, float("nan"), 3]})
    assert str(frame["size_bytes"].dtype) == "Int64"
    assert frame["size_bytes"].tolist()[0] == 1 and frame["size_bytes"].isna().tolist() == [False, True, False]
    table.check(frame)
    with pytest.raises(SchemaError, match="size_bytes"):
        table.frame({"size_bytes": [1.5]})


def test_nullable_whole_numbers_from_rows_with_none():
    table = Table("sizes", "one thing", (Column("size_bytes", "int64", "bytes", "its size", True),))
    frame = table.frame({"size_bytes": pd.Series([16 << 30, None], dtype=object)})
    assert str(frame["size_bytes"].dtype) == "Int64" and frame["size_bytes"].isna().tolist() == [False, True]
    with pytest.raises(SchemaError, match="size_bytes"):
        table.frame({"size_bytes": pd.Series(["16 GB"], dtype=object)})


def test_a_route_answers_one_way():
    """A table, several, or an object: a declaration giving two would be served one way and
    documented another."""
    with pytest.raises(ValueError, match="one of"):
        schema.route("both", "Both.", len, table=SAMPLE, fields={"sample": SAMPLE})
    assert "both" not in schema.ROUTES


def test_choices_mean_what_the_view_takes():
    assert schema.flag("by_step", "per step").value("true") is True
    assert schema.choice("flag", ("all", "launch_bound"), "which", {"all": None}).value("all") is None
    assert schema.choice("flag", ("all", "launch_bound"), "which", {"all": None}).value("launch_bound") == "launch_bound"
    # the profile decides a model choice: no value is valid before one is asked
    assert schema.model_choice("device", lambda model: ["CPU"], "a device").valid_value() is None


def test_tabs_have_one_name_and_one_place(monkeypatch):
    monkeypatch.setattr(schema, "TABS", {})
    schema.tab("first", 0, None)
    with pytest.raises(ValueError, match="twice"):
        schema.tab("first", 1, None)
    with pytest.raises(ValueError, match="'first'"):
        schema.tab("second", 0, None)
    schema.tab("third", -1, lambda offer: True)
    assert [t.name for t in schema.ordered_tabs()] == ["third", "first"]
