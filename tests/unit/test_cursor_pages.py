"""Cursor pagination as OpenAI's SDK walks it: pages in order, no object twice or left out."""

import sqlite3

import pytest

from retriever.objects.cursor_pages import ListSource, PageRequest, UnknownCursor, select_page

SOURCE = ListSource("items", "seq", "id", "owner = ?")


@pytest.fixture
def connection():
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE items (seq INTEGER PRIMARY KEY, id TEXT, owner TEXT)")
    connection.executemany(
        "INSERT INTO items (id, owner) VALUES (?, ?)",
        [(f"item-{n}", "me") for n in range(7)] + [("theirs", "them")],
    )
    yield connection
    connection.close()


def ids(connection, **page):
    rows, has_more = select_page(connection, "id", SOURCE, ("me",), PageRequest(**page))
    return [row[0] for row in rows], has_more


def test_newest_first_by_default_and_has_more_until_the_end(connection):
    assert ids(connection, limit=3) == (["item-6", "item-5", "item-4"], True)
    assert ids(connection, limit=3, after="item-4") == (["item-3", "item-2", "item-1"], True)
    assert ids(connection, limit=3, after="item-1") == (["item-0"], False)


def test_following_after_walks_every_object_once_in_both_orders(connection):
    for order in ("asc", "desc"):
        seen, after = [], None
        while True:
            page, has_more = ids(connection, limit=2, order=order, after=after)
            seen += page
            if not has_more:
                break
            after = page[-1]
        expected = [f"item-{n}" for n in range(7)]
        assert seen == (expected if order == "asc" else expected[::-1])


def test_before_gives_the_objects_just_before_in_list_order(connection):
    assert ids(connection, limit=2, before="item-2") == (["item-4", "item-3"], True)
    assert ids(connection, limit=2, order="asc", before="item-2") == (["item-0", "item-1"], False)
    assert ids(connection, after="item-5", before="item-2") == (["item-4", "item-3"], False)


def test_a_cursor_outside_the_list_is_refused(connection):
    with pytest.raises(UnknownCursor) as refused:
        ids(connection, after="theirs")
    assert refused.value.param == "after"
    with pytest.raises(UnknownCursor):
        ids(connection, before="nothing")
