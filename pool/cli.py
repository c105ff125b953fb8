"""The ``toolcodec`` command: decode, repair, kindaxml, worker, serve, bench.

Exit codes: 0 the result was printed and says ``ok``; 1 the result was printed and says
``ok: false`` (or the job did not finish: timeout, lost worker); 2 usage errors, unreadable input
or a bad tools file, reported on one line of stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson
from toolcodec.pool.door import MAX_TIMEOUT_MS

EXIT_OK, EXIT_NOT_OK, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), as for every other error."""

    def error(self, message: str) -> Any:
        sys.stderr.write(f"{self.prog}: {message} (see {self.prog} -h)\n")
        raise SystemExit(EXIT_USAGE)


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit 2."""


def _read_text(source: str) -> str:
    try:
        data = sys.stdin.buffer.read() if source == "-" else _read_file(source)
    except OSError as exc:
        raise CliError(f"cannot read {source}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{source} is not UTF-8 (bad byte at offset {exc.start})") from exc


def _read_file(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _load_tools(path: str | None) -> list[dict[str, Any]] | None:
    if path is None:
        return None
    text = _read_text(path)
    try:
        tools = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CliError(f"tools file {path} is not valid JSON: {exc}") from exc
    from toolcodec.schema.tools import InvalidToolsError, ToolRegistry

    if not isinstance(tools, list):
        raise CliError(f"tools file {path} must hold a JSON array of tool definitions")
    try:
        ToolRegistry.from_tools(tools)
    except InvalidToolsError as exc:
        raise CliError(f"tools file {path}: {exc}") from exc
    return tools


def _message_from(text: str, source: str) -> dict[str, Any]:
    try:
        message = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CliError(f"--message: {source} is not a JSON object: {exc}") from exc
    if not isinstance(message, dict):
        raise CliError(f"--message: {source} must hold a JSON object (an assistant message)")
    return message


def _print(result: dict[str, Any]) -> int:
    sys.stdout.buffer.write(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()
    return EXIT_OK if result.get("ok") else EXIT_NOT_OK


def _run_job(op: str, payload: dict[str, Any], args: argparse.Namespace) -> int:
    """Run one codec job in process or on the embedded process pool, print its result."""
    if args.in_process:
        from toolcodec.worker.jobs import run_job

        deadline = time.time() + args.timeout_ms / 1000
        envelope = run_job({"id": "cli", "op": op, "payload": payload, "deadline": deadline})
    else:
        from toolcodec.pool import Pool
        from toolcodec.pool.door import default_max_payload_chars, payload_size

        # The file is the user's own: carry all of it to the worker, so that both modes print
        # the codec's answer (text past max_chars is kept as content with payload_too_large).
        carry = max(default_max_payload_chars(), payload_size(payload, 10**12) + 1)
        with Pool(backend="process", workers=1, timeout_ms=args.timeout_ms,
                  max_payload_chars=carry) as pool:
            envelope = pool.submit(op, payload)
    if envelope["status"] != "ok":
        error = envelope.get("error") or {}
        detail = error.get("message") or envelope["status"]
        print(f"toolcodec {op}: {envelope['status']}: {detail}", file=sys.stderr)
        return EXIT_NOT_OK
    return _print(envelope["result"])


def _format_list(value: str) -> list[str]:
    from toolcodec.formats.registry import format_ids

    known = format_ids()  # installed families' ids included
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in known]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown format(s) {unknown or [value]}; expected "
                                         f"some of {', '.join(known)}")
    return chosen


def _cmd_decode(args: argparse.Namespace) -> int:
    tools = _load_tools(args.tools)
    text = _read_text(args.input)
    payload: dict[str, Any] = {"tools": tools or []}
    if args.message:
        payload["message"] = _message_from(text, args.input)
    else:
        payload["text"] = text
    if args.formats:
        payload["options"] = {"formats": args.formats}
    return _run_job("decode", payload, args)


def _cmd_repair(args: argparse.Namespace) -> int:
    return _run_job("repair", {"text": _read_text(args.input)}, args)


def _cmd_worker(args: argparse.Namespace) -> int:
    from toolcodec.worker import logs
    from toolcodec.worker.rq_worker import run

    logs.configure(args.log_format)

    return run(
        args.redis_url,
        queue=args.queue,
        concurrency=args.concurrency,
        metrics_port=args.metrics_port,
        max_chars=args.max_chars,
        max_depth=args.max_depth,
        allow_redis_shutdown=args.allow_redis_shutdown,
    )


def _cmd_bench(args: argparse.Namespace) -> int:
    from toolcodec.pool.bench.cli import BenchUsageError, run

    try:
        return run(args)
    except BenchUsageError as exc:
        raise CliError(str(exc)) from exc


def timeout_ms(text: str) -> float:
    """An argparse type: a budget in milliseconds the platform can wait (usage error else)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of milliseconds, got {text}")
    if value > MAX_TIMEOUT_MS:
        raise argparse.ArgumentTypeError(f"at most {MAX_TIMEOUT_MS:.0f} ms (one hour), got {text}")
    return value


def _bounded_int(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {value}")
        return value
    return parse


PORT = _bounded_int(1, 65535)
COUNT = _bounded_int(1, 1024)


def _job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", nargs="?", default="-", metavar="FILE|-",
                        help="model output to read (default: standard input)")
    parser.add_argument("--timeout-ms", type=timeout_ms, default=2000.0,
                        help="budget for the job in milliseconds (default: 2000)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the codec in this process instead of the embedded worker pool")


def _serve_parser(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the HTTP service (and, with --upstream, the "
                           "OpenAI-compatible repairing proxy)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1; 0.0.0.0 for all)")
    serve.add_argument("--port", type=PORT, default=8080, help="port to listen on (default: 8080)")
    serve.add_argument("--backend", choices=("process", "rq"), default="process",
                       help="where jobs run: embedded worker processes (default) or Redis/RQ "
                            "workers started with `toolcodec worker`")
    serve.add_argument("--workers", type=COUNT, default=None,
                       help="process backend: worker processes (default: CPU count)")
    serve.add_argument("--spares", type=_bounded_int(0, 64), default=None,
                       help="process backend: processes started beside the workers, to take "
                            "the slot of one killed at a deadline or set aside (default: 2)")
    serve.add_argument("--redis-url", default="redis://127.0.0.1:6379/0",
                       help="rq backend: the Redis the workers read (default: %(default)s)")
    serve.add_argument("--queue", default="toolcodec",
                       help="rq backend: queue name (default: toolcodec)")
    serve.add_argument("--timeout-ms", type=timeout_ms, default=50.0,
                       help="job budget; a request may only lower it (default: 50)")
    serve.add_argument("--max-chars", type=_bounded_int(1, 10**12), default=None,
                       help="process backend: the most characters the codec parses in one job; "
                            "longer text is answered like the library answers it (200, "
                            "payload_too_large in the result, the text kept as content) "
                            "(default: TOOLCODEC_MAX_CHARS or 8000000)")
    serve.add_argument("--max-depth", type=_bounded_int(1, 200), default=None,
                       help="process backend: the deepest nesting the codec reads "
                            "(default: TOOLCODEC_MAX_DEPTH or 128)")
    serve.add_argument("--max-payload-chars", type=_bounded_int(1, 10**12), default=None,
                       help="a job payload with more characters is answered 413 "
                            "payload_too_large, never carried to a worker "
                            "(default: the max-chars ceiling + 1000000 for tools and options)")
    serve.add_argument("--inline-max-chars", type=_bounded_int(0, 1 << 20), default=None,
                       help="decode jobs whose text (tools aside) has at most this many "
                            "characters run in the serving process, without a round trip to "
                            "a worker, once it has built their tools' codec; 0 turns it off "
                            "(default: 1024 with the process backend, 0 with rq)")
    serve.add_argument("--max-body", type=_bounded_int(1024, 1 << 30), default=10 * 1024 * 1024,
                       help="largest request body in bytes; larger is answered 413 "
                            "payload_too_large (default: 10 MiB)")
    serve.add_argument("--drain-s", type=float, default=10.0,
                       help="on SIGTERM, how long in-flight requests may finish (default: 10)")
    serve.add_argument("--shutdown-delay-s", type=float, default=5.0,
                       help="on SIGTERM, how long /readyz fails while requests are still "
                            "served, before the socket closes (default: 5; 0: close at once)")
    serve.add_argument("--upstream", default=None, metavar="URL",
                       help="model server to proxy /v1/chat/completions (and /v1/messages, "
                       "/v1/responses, translated to it) and /v1/models to")
    serve.add_argument("--upstream-key-env", default=None, metavar="VAR",
                       help="environment variable holding the upstream API key")
    serve.add_argument("--upstream-timeout-s", type=float, default=300.0,
                       help="longest wait for the model server between two bytes (default: 300)")
    serve.add_argument("--tools-as-prompt", action="store_true",
                       help="send the request's tools to upstream as a system prompt")
    serve.add_argument("--proxy-config", default=None, metavar="FILE",
                       help="decoder options per model name or pattern, TOML or YAML "
                       "(docs/proxy.md)")
    serve.add_argument("--preset", default=None, metavar="NAME",
                       help="decoder preset for models no entry matches, e.g. qwen3, "
                       "deepseek-r1, glm45, kimi-k2, gpt-oss, mistral, gemma, llama")
    serve.add_argument("--model-preset", action="append", default=[], metavar="PATTERN=NAME",
                       help="decoder preset for a model name or fnmatch pattern (repeatable)")
    serve.add_argument("--model-options", action="append", default=[], metavar="PATTERN=JSON",
                       help="decoder options (JSON object) for a model name or pattern, e.g. "
                       "'my-model={\"starts_in_reasoning\": true}' (repeatable)")
    serve.add_argument("--model-upstream", action="append", default=[], metavar="PATTERN=URL",
                       help="send the requests for a model name or fnmatch pattern to this "
                       "model server instead of --upstream (repeatable)")
    serve.add_argument("--upstream-connections", type=_bounded_int(1, 100_000), default=512,
                       help="connections to the model server at most (default: 512)")
    serve.add_argument("--upstream-pool-timeout-s", type=float, default=5.0,
                       help="longest wait for a free upstream connection before a 503 "
                       "(default: 5)")
    serve.add_argument("--request-deadline-s", type=float, default=600.0,
                       help="overall deadline of one proxied request, streams included; a "
                       "trickling upstream is cut there (default: 600)")
    serve.add_argument("--heartbeat-s", type=float, default=10.0,
                       help="SSE comment interval while a tool-call block is pending "
                       "(default: 10)")
    serve.add_argument("--max-upstream-body", type=_bounded_int(1024, 1 << 30),
                       default=32 * 1024 * 1024,
                       help="largest upstream answer, and SSE line, in bytes (default: 32 MiB)")
    serve.add_argument("--header-timeout-s", type=float, default=10.0,
                       help="a request's headers must be complete this long after its first "
                            "byte (after the connection opened, for its first request), else "
                            "408 and the connection is closed (default: 10)")
    serve.add_argument("--max-header-bytes", type=_bounded_int(1024, 1 << 24),
                       default=64 * 1024,
                       help="largest request line plus headers in bytes; larger ones are "
                            "answered 431 (default: 65536)")
    serve.add_argument("--log-format", choices=("json", "text"), default="text",
                       help="log lines as JSON objects or as text, one line each (default: "
                            "text)")
    serve.add_argument("--access-log", action="store_true",
                       help="one log line per HTTP request (method, path, status, duration, "
                            "request id, trace id, job ids)")


def _cmd_serve(args: argparse.Namespace) -> int:
    from toolcodec.pool.service.server import ServeConfig, run

    key = None
    if args.upstream_key_env:
        key = os.environ.get(args.upstream_key_env)
        if not key:
            raise CliError(f"--upstream-key-env: {args.upstream_key_env} is not set")
    if args.backend == "rq" and (args.max_chars or args.max_depth):
        raise CliError("--max-chars/--max-depth are set where the jobs run: "
                       "toolcodec worker --max-chars/--max-depth")
    for name in ("drain_s", "upstream_timeout_s", "upstream_pool_timeout_s",
                 "request_deadline_s", "heartbeat_s", "header_timeout_s"):
        if not (0 < getattr(args, name) <= 3600):
            raise CliError(f"--{name.replace('_', '-')} must be between 0 and 3600 seconds")
    if not 0 <= args.shutdown_delay_s <= 3600:
        raise CliError("--shutdown-delay-s must be between 0 and 3600 seconds")
    from toolcodec.pool.proxy.settings import ModelSettings, SettingsError

    try:
        models = ModelSettings.build(file=args.proxy_config, preset=args.preset,
                                     model_presets=args.model_preset,
                                     model_options=args.model_options,
                                     model_upstreams=args.model_upstream)
    except (OSError, SettingsError) as exc:
        raise CliError(str(exc)) from None
    proxy = {"connections": args.upstream_connections,
             "pool_timeout": args.upstream_pool_timeout_s,
             "deadline": args.request_deadline_s, "heartbeat": args.heartbeat_s,
             "max_upstream_body": args.max_upstream_body}
    return run(ServeConfig(args.host, args.port, args.backend, args.workers, args.redis_url,
                           args.queue, args.timeout_ms, args.max_body, args.drain_s,
                           args.upstream, key, args.tools_as_prompt,
                           args.upstream_timeout_s, max_chars=args.max_chars,
                           max_depth=args.max_depth,
                           max_payload_chars=args.max_payload_chars,
                           inline_max_chars=args.inline_max_chars, models=models,
                           spares=args.spares,
                           proxy=proxy, header_timeout_s=args.header_timeout_s,
                           max_header_bytes=args.max_header_bytes,
                           shutdown_delay_s=args.shutdown_delay_s,
                           log_format=args.log_format, access_log=args.access_log))


def _cmd_demo_upstream(args: argparse.Namespace) -> int:
    from toolcodec.pool.proxy import demo_upstream

    outputs = demo_upstream.recorded_outputs()
    if args.list:
        for row in outputs.values():
            print(json.dumps({k: row.get(k) for k in ("name", "origin", "model")},
                             ensure_ascii=False))
        return 0
    default = args.default or demo_upstream.DEFAULT
    if default not in outputs:
        raise CliError(f"--default: no recorded output {default!r}; see --list")
    return demo_upstream.serve(args.host, args.port, default)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="toolcodec",
        description="Decode, repair and validate tool calls emitted by language models.",
    )
    from toolcodec import __version__

    parser.add_argument("--version", action="version", version=f"toolcodec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    decode = sub.add_parser("decode", help="decode tool calls from a model output")
    decode.add_argument("--tools", metavar="FILE",
                        help="JSON array of tool definitions (OpenAI style)")
    decode.add_argument("--message", action="store_true",
                        help="the input is an OpenAI assistant message (JSON object)")
    decode.add_argument("--formats", type=_format_list, default=None, metavar="ID,ID",
                        help="read only these formats (default: every format, by its markers)")
    _job_options(decode)

    repair = sub.add_parser("repair", help="repair malformed JSON")
    _job_options(repair)

    sub.add_parser("kindaxml", help="parse KindaXML annotations (see `toolcodec kindaxml -h`)",
                   add_help=False)

    worker = sub.add_parser("worker", help="run RQ workers that execute codec jobs from Redis")
    worker.add_argument("--redis-url", required=True, help="e.g. redis://127.0.0.1:6379/0")
    worker.add_argument("--queue", default="toolcodec", help="queue name (default: toolcodec)")
    worker.add_argument("--concurrency", type=COUNT, default=None,
                        help="lanes, i.e. jobs run at once, each in its own child process "
                             "(default: the number of cores)")
    worker.add_argument("--metrics-port", type=PORT, default=None,
                        help="serve Prometheus metrics on this port")
    worker.add_argument("--max-chars", type=_bounded_int(1, 10**12), default=None,
                        help="ceiling on the characters one job may have parsed "
                             "(default: TOOLCODEC_MAX_CHARS or 8000000); jobs may only lower it")
    worker.add_argument("--max-depth", type=_bounded_int(1, 200), default=None,
                        help="ceiling on nesting depth "
                             "(default: TOOLCODEC_MAX_DEPTH or 128; at most 200)")
    worker.add_argument("--allow-redis-shutdown", action="store_true",
                        help="obey RQ's shutdown command published on Redis (rq's "
                             "send_shutdown_command); off by default because anyone who can "
                             "write to Redis could stop the workers. No other command is "
                             "ever obeyed")
    worker.add_argument("--log-format", choices=("json", "text"), default="text",
                        help="log lines as JSON objects or as text, one line each (default: "
                             "text)")

    _serve_parser(sub)
    demo = sub.add_parser("demo-upstream", help="serve recorded model outputs as an "
                          "OpenAI-compatible stand-in model server, to try the proxy")
    demo.add_argument("--host", default="127.0.0.1", help="address to listen on "
                      "(default: 127.0.0.1)")
    demo.add_argument("--port", type=PORT, default=8000, help="port to listen on (default: 8000)")
    demo.add_argument("--default", default=None, metavar="NAME",
                      help="the recorded output that answers a request naming none "
                      "(default: qwen3-hermes-broken; --list shows them)")
    demo.add_argument("--list", action="store_true",
                      help="print the recorded outputs (name, origin, model) and exit")
    from toolcodec.pool.bench.cli import add_parser as add_bench_parser

    add_bench_parser(sub)
    return parser


def _innermost(parser: argparse.ArgumentParser,
               args: argparse.Namespace) -> argparse.ArgumentParser:
    """The sub-command's own parser (``toolcodec bench capacity``) that *args* came through."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return _innermost(chosen, args)
    return parser


def kindaxml_main(argv: list[str]) -> int:
    """``toolcodec kindaxml [--tags cite,note,...] [FILE|-]``: parse a document, print JSON.

    Prints ``json.dumps(result.to_dict(), ensure_ascii=False)`` and returns 0; a bad ``--tags``
    or an unreadable input prints a one-line error on stderr and returns 2.
    """
    from toolcodec.kindaxml import KindaXMLConfig, parse  # loaded for this sub-command only

    parser = _Parser(
        prog="toolcodec kindaxml", description="Parse KindaXML annotations and print JSON."
    )
    parser.add_argument("--tags", metavar="TAG,TAG",
                        help="comma-separated recognised tag names (default: the spec's set)")
    parser.add_argument("file", nargs="?", default="-", metavar="FILE|-",
                        help="document to read (default: standard input)")
    args = parser.parse_args(argv)
    try:
        tags = None if args.tags is None else [t.strip() for t in args.tags.split(",")
                                               if t.strip()]
        config = KindaXMLConfig() if tags is None else KindaXMLConfig(recognized_tags=tags)
    except ValueError as exc:  # a --tags entry that is not a tag name
        print(f"toolcodec kindaxml: --tags: {exc}", file=sys.stderr)
        return 2
    try:
        text = _read_text(args.file)
    except CliError as exc:
        print(f"toolcodec kindaxml: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(parse(text, config=config).to_dict(), ensure_ascii=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0] == "kindaxml":
        return kindaxml_main(argv[1:])  # its own argument parser takes the rest untouched
    args, extra = parser.parse_known_args(argv)
    if extra:  # name the sub-command whose arguments these are, not the top-level program
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    handlers = {"decode": _cmd_decode, "repair": _cmd_repair, "worker": _cmd_worker,
                "serve": _cmd_serve, "bench": _cmd_bench,
                "demo-upstream": _cmd_demo_upstream}
    try:
        return handlers[args.command](args)
    except CliError as exc:
        print(f"toolcodec {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
