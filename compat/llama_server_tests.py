"""`make compat`: llama.cpp's own server tests, run against Hearth (or against llama-server).

Hearth speaks llama-server's dialect (/completion, /tokenize, /apply-template, the OpenAI and
Anthropic routes without /v1, ...), so the best judge of that dialect is the test suite
llama.cpp ships with llama-server. This script takes those tests from the llama-cpp-python
sdist Hearth is built from (the same llama.cpp revision), installs their requirements in a
virtualenv of their own (they pin openai, numpy, aiohttp... differently from Hearth), and runs
every test file of its unit/ folder the suite's own way: each test starts its server with its
own settings (chat template file, --reasoning, context, slots...), through
compat/llama_server_shim.py standing in for the llama-server binary. `--mode external` runs
four files in the suite's "external server" mode instead (DEBUG_EXTERNAL=1: one server started
here, the tests sending requests to localhost:PORT) and three more spawned, which is faster
but applies no per-test setting to the four.

Most content checks expect the exact text of llama.cpp's 260K-parameter test
model, so the point is the per-case report (`--report FILE`, JSON), not a green run: the exit
status is 0 whenever the tests could run, unless `--strict`. `--against llama-server` runs the
same tests against llama.cpp's llama-server (built by bench/build_llama_server.sh) with the same
model, as the baseline; see docs/COMPATIBILITY.md for both results.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
TESTS_IN_SDIST = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/tools/server/tests"
TEMPLATES_IN_SDIST = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/models/templates"
PICTURE_IN_SDIST = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/tools/mtmd/test-1.jpeg"
# Run against one server started here (external mode).
TEST_FILES = (
    "unit/test_chat_completion.py",
    "unit/test_compat_anthropic.py",
    "unit/test_completion.py",
    "unit/test_tokenize.py",
)
# External mode's other files, run with a server per test through the shim; spawned mode (the
# default) runs every file of unit/ that way (per-test settings apply).
SPAWNED_TEST_FILES = (
    "unit/test_template.py",
    "unit/test_tool_call.py",
    "unit/test_security.py",  # keys and CORS (docs/SECURITY.md)
)
SHIM = Path(__file__).resolve().parent / "llama_server_shim.py"
OFFLINE_PLUGIN = Path(__file__).resolve().parent / "offline_media.py"
# Not in the suite's requirements: a per-test limit, so one hung stream cannot stall the run.
EXTRA_REQUIREMENTS = ("pytest-timeout~=2.3",)
CONTEXT = 8192
# ServerPreset.tinyllama2(), the preset of all four files: 2 slots, 64 tokens when a request
# names no limit, temperature 0.8 and seed 42 (utils.py passes --temp and --seed always).
SLOTS = 2
N_PREDICT = 64
SEED = 42
READY_TIMEOUT = 900.0  # a first Hearth start assembles the bundled model


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run(command: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    say("+ " + shlex.join(str(part) for part in command))
    return subprocess.run([str(part) for part in command], check=True, text=True, **kwargs)


# --- the tests and their virtualenv ----------------------------------------------------------


def ensure_tests(cache: Path) -> Path:
    """The sdist's tools/server/tests folder (and the chat templates its tests read from
    models/templates, and the picture offline_media.py answers with), downloaded and
    unpacked once."""
    tests = cache / TESTS_IN_SDIST
    done = tests / ".unpacked-with-templates-and-picture"
    if done.exists():
        return tests
    sdist = cache / "sdist" / SDIST
    if not sdist.exists():
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                sdist.parent,
                f"llama-cpp-python=={VERSION}",
            ]
        )
    prefixes = (TESTS_IN_SDIST + "/", TEMPLATES_IN_SDIST + "/", PICTURE_IN_SDIST)
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefixes)]
        if not members:
            raise SystemExit(f"{sdist} has no {TESTS_IN_SDIST}")
        archive.extractall(cache, members=members, filter="data")
    done.touch()
    return tests


def ensure_venv(cache: Path, tests: Path) -> Path:
    """A virtualenv with the tests' requirements (re-made when they change); its python."""
    venv = cache / "venv"
    python = venv / "bin" / "python"
    requirements = (tests / "requirements.txt").read_text()
    wanted = hashlib.sha256("\n".join([requirements, *EXTRA_REQUIREMENTS]).encode()).hexdigest()
    stamp = venv / ".requirements-sha256"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", venv])
    run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "-r",
            tests / "requirements.txt",
            *EXTRA_REQUIREMENTS,
        ]
    )
    stamp.write_text(wanted)
    return python


# --- the server under test --------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hearth_command(python: str, port: int) -> list[str]:
    # The preset's settings that Hearth has flags for: context, slots, default length, seed
    # (Hearth has no server-wide temperature: its default, 0.7, stays).
    return [
        python,
        "-m",
        "server",
        "--skiplauncher",
        "--contextsize",
        str(CONTEXT),
        "--parallelrequests",
        str(SLOTS),
        "--defaultgenamt",
        str(N_PREDICT),
        "--seed",
        str(SEED),
        "--port",
        str(port),
    ]


def bundled_model(python: str, cwd: Path) -> str:
    """The bundled Gemma 3 270M GGUF, as the checkout at `cwd` finds (or assembles) it."""
    code = "from server.models.files import bundled_model_path; print(bundled_model_path())"
    found = subprocess.run(
        [python, "-c", code], cwd=cwd, check=True, text=True, capture_output=True
    )
    return found.stdout.strip().splitlines()[-1]


def build_llama_server() -> str:
    say("Building llama-server (first time ~15 minutes on 2 cores) ...")
    built = run(["bash", ROOT / "bench" / "build_llama_server.sh"], stdout=subprocess.PIPE)
    return built.stdout.strip().splitlines()[-1]


def llama_server_command(binary: str, model: str, port: int, template: str | None) -> list[str]:
    # What ServerPreset.tinyllama2() and the fixtures would pass, where it makes sense for one
    # server shared by every test: --jinja (this llama.cpp's default; the tool and Anthropic
    # tests set it), /slots (test_cancel_request reads it), 2 slots, 64 tokens by default,
    # --temp 0.8 --seed 42. Not --batch-size 32: it only slows prompts down.
    command = [
        binary,
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ctx-size",
        str(CONTEXT),
        "--parallel",
        str(SLOTS),
        "--n-predict",
        str(N_PREDICT),
        "--temp",
        "0.8",
        "--seed",
        str(SEED),
        "--jinja",
        "--slots",
        "--no-webui",
    ]
    # No template by default: the GGUF has none, so llama-server uses its own ChatML fallback,
    # which accepts every role order the tests send (see docs/COMPATIBILITY.md).
    if template:
        command += ["--chat-template-file", template]
    return command


def probe(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


@contextlib.contextmanager
def running_server(command: Sequence[str], cwd: Path, port: int, log: Path) -> Iterator[None]:
    """Start the server, wait until /health (or, where that is 404, /api/v1/model) answers
    200, and stop it (its whole process group) afterwards."""
    say(f"Starting (cwd {cwd}, log {log}):\n  " + shlex.join(command))
    with open(log, "w") as log_file:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        path = "/health"
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the server exited with {process.returncode}; see {log}")
            if time.monotonic() > deadline:
                raise SystemExit(f"the server was not ready in {READY_TIMEOUT:.0f} s; see {log}")
            status = probe(f"http://127.0.0.1:{port}{path}")
            if status == 200:
                break
            if status == 404 and path == "/health":
                path = "/api/v1/model"
            time.sleep(0.5)
        say(f"Ready: GET {path} answers 200 on port {port}")
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- running the tests and reading the results ------------------------------------------------


def run_pytest(
    python: Path,
    tests: Path,
    files: Sequence[str],
    env_extra: dict[str, str],
    junit: Path,
    log: Path,
    timeout: int,
    extra: Sequence[str],
) -> int:
    env = dict(os.environ)
    for name in ("DEBUG", "DEBUG_EXTERNAL", "PYTEST_ADDOPTS", "LLAMA_SERVER_BIN_PATH"):
        env.pop(name, None)
    env.update(env_extra)
    # The suite's vision cases download a picture: compat/offline_media.py answers instead.
    env["PYTHONPATH"] = os.pathsep.join([str(OFFLINE_PLUGIN.parent), env.get("PYTHONPATH", "")])
    env["HEARTH_COMPAT_PICTURE"] = str(tests.parent.parent / "mtmd" / "test-1.jpeg")
    command = [
        str(python),
        "-m",
        "pytest",
        *files,
        "-rA",
        "-p",
        "no:cacheprovider",
        "-p",
        OFFLINE_PLUGIN.stem,
        "--timeout",
        str(timeout),
        f"--junitxml={junit}",
        *extra,
    ]
    shown = " ".join(f"{k}={v}" for k, v in env_extra.items() if not k.startswith("HEARTH_SHIM"))
    say(f"Running in {tests} (output: {log}):\n  {shown} " + shlex.join(command))
    with open(log, "w") as log_file:
        return subprocess.run(
            command, cwd=tests, env=env, stdout=log_file, stderr=subprocess.STDOUT
        ).returncode


def unit_files(tests: Path) -> list[str]:
    """Every test file of the suite's unit/ folder (spawned mode runs them all)."""
    return sorted(f"unit/{path.name}" for path in (tests / "unit").glob("test_*.py"))


def read_junit(junit: Path) -> list[dict[str, str]]:
    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = found.get("message") or (found.text or "").strip()
                break
        message = " ".join(message.split())
        cases.append(
            {
                "id": f"{module}.py::{case.get('name')}",
                "outcome": outcome,
                "message": message[:500],
            }
        )
    return cases


def git_commit(cwd: Path) -> str | None:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True, text=True
    )
    return found.stdout.strip() or None


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--against",
        choices=("hearth", "llama-server"),
        default="hearth",
        help="the server under test (default: hearth)",
    )
    parser.add_argument(
        "--server-cwd",
        type=Path,
        default=ROOT,
        help="the checkout Hearth runs from (its `server` package is imported from there, "
        "e.g. a git worktree at a fixed commit); default: this checkout",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the Python that runs Hearth (default: this one)",
    )
    parser.add_argument("--llama-server", help="a llama-server binary (default: build one)")
    parser.add_argument("--model", help="the GGUF llama-server serves (default: the bundled one)")
    parser.add_argument(
        "--chat-template-file",
        help="a Jinja chat template for llama-server (default: none, its ChatML fallback)",
    )
    parser.add_argument(
        "--mode",
        choices=("spawned", "external"),
        default="spawned",
        help="spawned (default): every test starts its server with its own settings, through "
        "compat/llama_server_shim.py; external: one server for the first four files (faster, "
        "but per-test settings such as a chat template do not apply)",
    )
    parser.add_argument("--report", type=Path, help="write the per-case results here (JSON)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any case does not pass")
    parser.add_argument(
        "--slow", action="store_true", help="include the tests marked slow (not run by default)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(
            os.environ.get("HEARTH_COMPAT_CACHE", Path.home() / ".cache" / "hearth-compat")
        ),
        help="where the sdist, the tests, their virtualenv and the logs go "
        "(default: $HEARTH_COMPAT_CACHE or ~/.cache/hearth-compat)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="CPU threads for the server (default: its own); 1 avoids ggml's spinning thread "
        "barriers on a machine whose cores are busy with other work",
    )
    parser.add_argument(
        "--test-timeout",
        type=int,
        default=300,
        help="seconds one test may take (default 300; more on a busy machine)",
    )
    parser.add_argument(
        "--files",
        nargs="+",
        metavar="unit/test_X.py",
        help="only these test files of unit/ (default: every one)",
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    return parser.parse_args()


def server_under_test(
    args: argparse.Namespace, port: int
) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    """The shared server's command line, what the report records about it, and the environment
    that makes the shim start the same kind of server for the spawned files."""
    server_cwd = args.server_cwd
    model = args.model or bundled_model(args.python, server_cwd)
    info: dict[str, Any] = {"against": args.against, "llama_cpp_python": VERSION, "model": model}
    shim_env = {
        "LLAMA_SERVER_BIN_PATH": str(SHIM),
        "PORT": str(port),
        "HEARTH_SHIM_TARGET": args.against,
        "HEARTH_SHIM_MODEL": model,
        "HEARTH_SHIM_CWD": str(server_cwd),
        "HEARTH_SHIM_PROJECTOR": str(tiny_projector(args.cache, Path(model))),
    }
    if args.against == "hearth":
        command = hearth_command(args.python, port)
        if args.threads:
            command += ["--threads", str(args.threads)]
            shim_env["HEARTH_SHIM_EXTRA"] = f"--threads {args.threads}"
        imported = subprocess.run(
            [args.python, "-c", "import server; print(server.__file__)"],
            cwd=server_cwd,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        say(f"Hearth's `server` package: {imported}")
        info |= {"commit": git_commit(server_cwd), "server_module": imported}
        shim_env["HEARTH_SHIM_PYTHON"] = str(Path(args.python).absolute())
    else:
        binary = str(Path(args.llama_server or build_llama_server()).resolve())
        template = str(Path(args.chat_template_file).resolve()) if args.chat_template_file else None
        command = llama_server_command(binary, model, port, template)
        if args.threads:
            command += ["--threads", str(args.threads), "--threads-batch", str(args.threads)]
            shim_env["HEARTH_SHIM_EXTRA"] = (
                f"--threads {args.threads} --threads-batch {args.threads}"
            )
        shim_env["HEARTH_SHIM_BINARY"] = binary
    return command, info, shim_env


def tiny_projector(cache: Path, model: Path) -> Path:
    """A tiny Gemma 3 projector for `model` (random weights; tests/support/projector_gguf.py),
    for the suite's vision cases: written once into the cache."""
    path = cache.expanduser().resolve() / f"tiny-mmproj-{model.stem}.gguf"
    if not path.exists():
        sys.path.insert(0, str(ROOT))
        from tests.support.projector_gguf import write_projector

        write_projector(path, model)
    return path


def main() -> int:
    args = parse_args()
    cache = args.cache.expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    tests = ensure_tests(cache)
    test_python = ensure_venv(cache, tests)
    args.server_cwd = args.server_cwd.expanduser().resolve()
    port = free_port()
    command, info, shim_env = server_under_test(args, port)
    logs = cache / "logs"
    logs.mkdir(exist_ok=True)
    extra = list(args.pytest_args) if args.slow else ["-m", "not slow", *args.pytest_args]
    every_file = args.files or unit_files(tests)
    groups: tuple[tuple[str, Sequence[str], dict[str, str]], ...] = (
        ("spawned", every_file, shim_env),
    )
    if args.mode == "external":
        groups = (
            ("external", TEST_FILES, {"DEBUG_EXTERNAL": "1", "PORT": str(port)}),
            ("spawned", SPAWNED_TEST_FILES, shim_env),
        )
        every_file = [*TEST_FILES, *SPAWNED_TEST_FILES]
    cases: list[dict[str, str]] = []
    started = time.monotonic()
    for name, files, env_extra in groups:
        junit = logs / f"{args.against}-{name}-junit.xml"
        pytest_log = logs / f"{args.against}-{name}-pytest.log"
        junit.unlink(missing_ok=True)
        if name == "external":
            with running_server(
                command, args.server_cwd, port, logs / f"{args.against}-server.log"
            ):
                code = run_pytest(
                    test_python,
                    tests,
                    files,
                    env_extra,
                    junit,
                    pytest_log,
                    args.test_timeout,
                    extra,
                )
        else:
            code = run_pytest(
                test_python, tests, files, env_extra, junit, pytest_log, args.test_timeout, extra
            )
        if code not in (0, 1) or not junit.exists():
            say(f"pytest could not run the tests (exit {code}); see {pytest_log}")
            return 2
        cases += read_junit(junit)
    elapsed = time.monotonic() - started
    if args.against == "hearth" and git_commit(args.server_cwd) != info["commit"]:
        info["commit_after"] = git_commit(args.server_cwd)
        say(f"Warning: {args.server_cwd} moved from {info['commit']} to {info['commit_after']}")
    totals = summarize(args.against, cases, elapsed, logs)
    if args.report:
        report = {
            **info,
            "server_command": [str(part) for part in command]
            if args.mode == "external"
            else "each test's own, through compat/llama_server_shim.py",
            "mode": args.mode,
            "test_files": list(every_file),
            "pytest_args": extra,
            "totals": totals,
            "cases": cases,
        }
        args.report.write_text(json.dumps(report, indent=2) + "\n")
        say(f"Report: {args.report}")
    if args.strict and totals.get("passed", 0) + totals.get("skipped", 0) != len(cases):
        return 1
    return 0


def summarize(
    against: str, cases: list[dict[str, str]], elapsed: float, logs: Path
) -> dict[str, int]:
    totals: dict[str, int] = {}
    label = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}
    for case in cases:
        totals[case["outcome"]] = totals.get(case["outcome"], 0) + 1
        say(f"{label[case['outcome']]:5} {case['id']}")
    say(
        f"\n{against}: {totals.get('passed', 0)} of {len(cases)} passed "
        + ", ".join(f"{count} {name}" for name, count in sorted(totals.items()))
        + f" ({elapsed:.0f} s; pytest output and server logs: {logs})"
    )
    return totals


if __name__ == "__main__":
    sys.exit(main())
