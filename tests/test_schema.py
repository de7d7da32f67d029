"""The table declaration primitive (tb_plugin/schema.py): a frame is built to its declaration
or refused with the table and column named."""

import numpy as np
import pandas as pd
import pytest

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
        Column("n", "int64", "", "ids use -1 instead", nullable=True)
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
