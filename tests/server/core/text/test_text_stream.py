from server.core.text.text_stream import (
    StopMatch,
    StopStringFilter,
    TokenTextPipeline,
    Utf8Assembler,
)


def test_utf8_assembler_never_splits_a_character() -> None:
    emoji = "🔥".encode()
    assembler = Utf8Assembler()
    assert [assembler.feed(emoji[i : i + 1]) for i in range(4)] == ["", "", "", "🔥"]


def test_utf8_assembler_flush_replaces_a_truncated_character() -> None:
    assembler = Utf8Assembler()
    assert assembler.feed("é".encode()[:1]) == ""
    assert assembler.flush() == "\ufffd"


def test_stop_filter_holds_back_a_possible_stop_start_then_releases_it() -> None:
    stops = StopStringFilter(("###",))
    assert stops.feed("ab#") == "ab"
    assert stops.feed("#") == ""
    assert stops.feed("x") == "##x"


def test_stop_filter_trims_the_stop_and_what_follows() -> None:
    stops = StopStringFilter(("END", "STOP"))
    assert stops.feed("one ST") == "one "
    assert stops.feed("OP two") == StopMatch("", "STOP")


def test_stop_filter_keeps_the_stop_when_trim_is_off() -> None:
    stops = StopStringFilter(("END",), trim_stop=False)
    assert stops.feed("the END of it") == StopMatch("the END", "END")


def test_stop_filter_reports_the_earliest_stop() -> None:
    stops = StopStringFilter(("b", "a"))
    assert stops.feed("xab") == StopMatch("x", "a")


def test_pipeline_finish_releases_held_text() -> None:
    pipeline = TokenTextPipeline(("<end>",))
    assert pipeline.push(b"hello <e") == ("hello ", None)
    assert pipeline.finish() == "<e"


def test_pipeline_stop_spanning_a_split_character() -> None:
    pipeline = TokenTextPipeline(("é!",))
    encoded = "aé!".encode()
    results = [pipeline.push(encoded[i : i + 1]) for i in range(len(encoded))]
    assert results[-1] == ("", "é!")
    assert "".join(text for text, _ in results) == "a"
