"""The files the pipeline ships inside its package (node inventory, scheduler pools), readable from a zip too.

`spark-submit --py-files headwater_pipeline.zip` imports the package from the zip: a path inside it means
nothing to the JVM, so the inventory's text is read here (and shipped to the executors as data, see
`enrich.read_inventory`) and the scheduler file is copied once to a local temporary file for the driver's JVM.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path

INVENTORY = "nodes.csv"
FAIR_SCHEDULER = "fairscheduler.xml"


def text(name: str) -> str:
    """The text of packaged data file `name` (in spark_pipeline/data/)."""
    return resources.files("spark_pipeline").joinpath("data", name).read_text(encoding="utf-8")


@cache
def local_file(name: str) -> Path:
    """A local file the JVM can open holding packaged data file `name`: the file itself when the package sits
    on disk, else a copy in a temporary folder removed at exit."""
    source = resources.files("spark_pipeline").joinpath("data", name)
    if isinstance(source, Path) and source.is_file():
        return source
    folder = tempfile.mkdtemp(prefix="headwater-pipeline-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    target = Path(folder) / name
    target.write_bytes(source.read_bytes())
    os.chmod(target, 0o444)
    return target
