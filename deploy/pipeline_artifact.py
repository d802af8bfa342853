"""Builds what `spark-submit` takes to run the pipeline on a cluster: a zip of the packages, an entry file, the
pinned requirements for the cluster's Python (`make pipeline-artifact`; docs/spark-pipeline.md).

    python -m deploy.pipeline_artifact [--out dist/pipeline]

The zip holds `spark_pipeline` (with its data files, read from the zip by `spark_pipeline/packaged.py`) and
`common`; nothing of the development tree. Pure Python: the third-party packages (requirements.txt) must be
installed in the executors' and driver's Python environment.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout whose packages go into the zip

ZIP_NAME = "headwater_pipeline.zip"
ENTRY_NAME = "headwater_pipeline_main.py"
PACKAGES = ("spark_pipeline", "common")
DATA_SUFFIXES = (".csv", ".xml")
ENTRY = '''"""spark-submit's entry file for the Headwater pipeline: the same commands as `headwater-pipeline`."""

import sys

from spark_pipeline.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
'''


def package_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files of the zip, relative to `root`: every module and packaged data file, no caches or builds."""
    files: list[Path] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            rel = path.relative_to(root)
            if not path.is_file() or {"__pycache__", "build"} & set(rel.parts) or ".egg-info" in str(rel):
                continue
            if path.suffix == ".py" or (path.suffix in DATA_SUFFIXES and "data" in rel.parts):
                files.append(rel)
    return files


def requirements(root: Path = REPO_ROOT) -> list[str]:
    """The pipeline's pinned runtime dependencies (spark_pipeline/pyproject.toml)."""
    project = tomllib.loads((root / "spark_pipeline" / "pyproject.toml").read_text())["project"]
    return [str(d) for d in project["dependencies"]]


def build(out: Path, root: Path = REPO_ROOT) -> Path:
    """Write the zip, the entry file and requirements.txt into `out`; return the zip's path."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / ZIP_NAME
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in package_files(root):
            # A fixed timestamp: the same sources give the same zip.
            info = zipfile.ZipInfo(rel.as_posix(), date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, (root / rel).read_bytes())
    tmp.replace(target)
    (out / ENTRY_NAME).write_text(ENTRY)
    (out / "requirements.txt").write_text("".join(f"{r}\n" for r in requirements(root)))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.pipeline_artifact", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "dist" / "pipeline", help="output folder")
    args = parser.parse_args(argv)
    zip_path = build(args.out)
    print(f"built {zip_path} ({zip_path.stat().st_size} bytes), {args.out / ENTRY_NAME}, "
          f"{args.out / 'requirements.txt'}")
    print(f"run: spark-submit --packages <connectors> --py-files {zip_path} {args.out / ENTRY_NAME} run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
