"""The one error base (`tb_plugin.errors.PublicError`) and the route wrapper that answers it."""

import pickle
import time

import pytest
from werkzeug.test import Client

from tb_plugin import TraceError, load, load_run
from tb_plugin.server.http import Inputs, respond, route
from tb_plugin.server.accounting import ReplyCache
from tb_plugin.errors import BadParameterError, NotFoundError, PublicError, StillLoadingError

from .helpers import op, write_trace


@pytest.mark.parametrize("error, status, code", [
    (NotFoundError("no run named 'x'"), 404, "not_found"),
    (BadParameterError("parameter 'span' must be an integer"), 400, "bad_parameter"),
    (StillLoadingError("run/w.pt.trace.json", time.time(), "parsing", 0.5), 202, "loading"),
    (TraceError("run/w.pt.trace.json", "truncated"), 422, "bad_trace"),
])
def test_every_kind_is_a_public_error_with_its_status(error, status, code):
    assert isinstance(error, PublicError)
    assert (error.status, error.error) == (status, code)


def test_bodies_say_what_the_routes_always_said():
    assert NotFoundError("no run named 'x'").body() == {"error": "not_found", "reason": "no run named 'x'"}
    assert BadParameterError("x is required", error="missing_parameter").body() == {
        "error": "missing_parameter", "reason": "x is required"}
    assert TraceError("a/b.json", "truncated").body() == {"error": "bad_trace", "reason": "truncated", "path": "a/b.json"}
    loading = StillLoadingError("a/b.json", time.time() - 2, "parsing", 0.123456, ready=1, total=3).body()
    assert loading["loading"] is True and loading["stage"] == "parsing" and loading["fraction"] == 0.1235
    assert loading["elapsed_seconds"] >= 2 and (loading["ready"], loading["total"]) == (1, 3)


def test_not_found_is_a_key_error_whose_message_is_not_quoted():
    with pytest.raises(KeyError) as info:
        raise NotFoundError("no worker 'w9'")
    assert str(info.value) == "no worker 'w9'"


def test_trace_error_keeps_path_and_reason_through_pickle():
    error = pickle.loads(pickle.dumps(TraceError("a/b.json", "not JSON")))
    assert (error.path, error.reason, str(error)) == ("a/b.json", "not JSON", "a/b.json: not JSON")


def test_python_api_raises_not_found_for_unknown_workers_and_spans(tmp_path):
    write_trace(tmp_path / "run" / "w0.pt.trace.json", [op("aten::add", 0, 5)])
    run = load_run(str(tmp_path / "run"))
    with pytest.raises(NotFoundError, match="no worker 'nope'"):
        run.profile("nope")
    with pytest.raises(NotFoundError, match="spans 1..1, not 2"):
        run.profile("w0", span=2)


def test_a_view_raises_not_found_for_an_unknown_event(tmp_path):
    profile = load(str(write_trace(tmp_path / "w.pt.trace.json", [op("aten::add", 0, 5)])))
    with pytest.raises(NotFoundError, match="no event 7; events are 0..0"):
        profile.timeline_event(7)


class _Profile:
    """Stands for a profile: the reply cache holds its inputs weakly, by identity."""


def _client(handler, replies, inputs=None):
    return Client(route(handler, replies, inputs, replies.put if replies is not None else None))


def test_the_wrapper_answers_every_public_error_and_hides_other_failures():
    def failing(request):
        raise {"nf": NotFoundError("gone"), "bad": BadParameterError("no"), "oops": RuntimeError("secret")}[
            request.args["what"]]

    client = _client(failing, None)
    assert (client.get("/?what=nf").status_code, client.get("/?what=nf").json) == (404, {"error": "not_found", "reason": "gone"})
    assert client.get("/?what=bad").status_code == 400
    internal = client.get("/?what=oops")
    assert internal.status_code == 500 and "secret" not in internal.get_data(as_text=True)
    assert client.post("/?what=nf").status_code == 405


def test_a_cached_answer_is_looked_up_before_the_handler_runs():
    profile, calls = _Profile(), []

    def handler(request, used_profile):
        calls.append(request.full_path)
        assert used_profile is profile
        return respond({"n": len(calls)})

    client = _client(handler, ReplyCache(1 << 20), lambda request: Inputs([profile], (profile,)))
    assert client.get("/?x=1").json == {"n": 1}
    assert client.get("/?x=1").json == {"n": 1}  # the same answer, not computed again
    assert client.get("/?x=2").json == {"n": 2}  # another request path is another answer
    assert len(calls) == 2


def test_failed_answers_are_not_kept():
    profile, calls = _Profile(), []

    def handler(request, used_profile):
        calls.append(1)
        raise BadParameterError("no")

    client = _client(handler, ReplyCache(1 << 20), lambda request: Inputs([profile], (profile,)))
    assert client.get("/").status_code == client.get("/").status_code == 400
    assert len(calls) == 2


def test_inputs_still_loading_answer_202_without_calling_the_handler():
    def inputs(request):
        raise StillLoadingError("a.json", time.time(), "queued")

    def handler(request, *args):
        raise AssertionError("called while loading")

    response = _client(handler, ReplyCache(1 << 20), inputs).get("/")
    assert response.status_code == 202 and response.json["loading"] is True
