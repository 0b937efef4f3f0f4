import pytest

import calc


def test_tokens():
    assert calc.tokens("1 + 22.5*(3)") == [1.0, "+", 22.5, "*", "(", 3.0, ")"]


@pytest.mark.parametrize(
    "text, want",
    [
        ("1 + 2", 3.0),
        ("2 * 3 + 4", 10.0),
        ("2 * (3 + 4)", 14.0),
        ("-3 + 5", 2.0),
        ("7 / 2", 3.5),
    ],
)
def test_evaluate(text, want):
    assert calc.evaluate(text) == want


def test_division_by_zero():
    with pytest.raises(ZeroDivisionError):
        calc.evaluate("1 / 0")


def test_unbalanced():
    with pytest.raises(ValueError, match="missing"):
        calc.evaluate("(1 + 2")


def test_reads_fixture(request):
    path = request.path.parent / "expressions.txt"
    for line in path.read_text().splitlines():
        text, want = line.split("=")
        assert calc.evaluate(text) == float(want)


def test_evaluates_a_file_it_writes(tmp_path):
    # Graded tests write scratch files through pytest's tmp_path, which pytest makes under
    # /tmp/pytest-of-<user>/pytest-<n>/ and cleans up after three sessions.
    path = tmp_path / "expressions.txt"
    path.write_text("3*(1+1)=6\n")
    text, want = path.read_text().strip().split("=")
    assert calc.evaluate(text) == float(want)
