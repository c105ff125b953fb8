"""The distribution installs one import namespace, ``toolcodec``, into a fresh virtualenv.

A wheel is built from this checkout and installed (without its dependencies) into a new venv;
its site-packages must then hold ``toolcodec`` and its metadata and nothing named ``codec``,
``worker`` or ``pool``. The new venv borrows the dependencies from the environment running the
suite (its site-packages directories, named in a ``.pth`` file), not from the base interpreter:
a suite run inside a virtualenv has them there only.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The venv's directory, with the wheel built from this checkout installed."""
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the tracked files: the build leaves nothing in the checkout.
    src = work / "src"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(work / "dist"), str(src)], check=True, cwd=work)
    wheels = list((work / "dist").glob("toolcodec-*.whl"))
    assert len(wheels) == 1, wheels
    env = work / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env)
    python = env / "bin" / "python"
    # After the venv's own site-packages: the wheel's toolcodec is found first. A .pth file in
    # these directories is not run from here, so the checkout's editable install stays out.
    (_site_packages(env) / "suite_environment.pth").write_text(
        "".join(f"{path}\n" for path in suite_site_packages()))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", str(wheels[0])], check=True, cwd=work)
    return env


def suite_site_packages() -> list[str]:
    """The site-packages directories of the interpreter environment running the suite."""
    return [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]


def _site_packages(env: Path) -> Path:
    version = sysconfig.get_python_version()
    return env / "lib" / f"python{version}" / "site-packages"


def test_only_the_toolcodec_namespace_is_installed(installed: Path) -> None:
    names = {p.name for p in _site_packages(installed).iterdir()}
    ours = {n for n in names if n.lower().startswith("toolcodec")}
    assert "toolcodec" in ours
    assert {"codec", "worker", "pool"}.isdisjoint(names), sorted(names)
    assert {n for n in ours if n != "toolcodec" and not n.endswith(".dist-info")} == set()


def test_the_wheel_carries_every_subpackage_and_the_type_marker(installed: Path) -> None:
    pkg = _site_packages(installed) / "toolcodec"
    assert (pkg / "py.typed").is_file()
    for sub in ("formats", "kindaxml", "worker", "pool", "pool/service", "pool/proxy",
                "pool/bench"):
        assert (pkg / sub / "__init__.py").is_file(), sub
    # toolcodec demo-upstream's recorded outputs are package data
    assert (pkg / "pool" / "proxy" / "demo_outputs.jsonl").is_file()


def test_the_installed_package_imports_and_reports_its_version(installed: Path,
                                                                tmp_path: Path) -> None:
    code = ("import importlib.util, toolcodec, toolcodec.pool, toolcodec.worker.jobs\n"
            f"assert toolcodec.__file__.startswith({str(installed)!r}), toolcodec.__file__\n"
            "assert all(importlib.util.find_spec(n) is None for n in ('codec','worker','pool'))\n"
            "import orjson, starlette\n"
            f"suite = {suite_site_packages()!r}\n"
            "assert all(m.__file__.startswith(tuple(suite)) for m in (orjson, starlette)), "
            "(orjson.__file__, suite)\n"
            "from toolcodec.pool.proxy.demo_upstream import DEFAULT, recorded_outputs\n"
            "assert DEFAULT in recorded_outputs()\n"
            "print(toolcodec.__version__)\n")
    # From an empty folder, so the checkout's own folders are not on sys.path.
    out = subprocess.run([str(installed / "bin" / "python"), "-c", code], cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    import toolcodec

    assert out.stdout.strip() == toolcodec.__version__
    cli = subprocess.run([str(installed / "bin" / "toolcodec"), "--version"], cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    assert cli.stdout.strip() == f"toolcodec {toolcodec.__version__}"
