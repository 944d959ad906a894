"""The SPDK peer build as the bench/ scripts run it (bench/malloc-ceilings,
bench/nvmf-vs-spdk): the environment its binaries load in, set up once
before any measurement, in the script's own (single) thread.

Imported by the scripts from their own directory; it writes nothing but
symlinks in the caller's temporary directory (and, as root, runs the
build's `setup`).
"""

import os
import re
import subprocess


class Unusable(Exception):
    """The SPDK build cannot run here; the message says why and what to do."""


def environment(spdk, tmp, exe, pages, note):
    """The environment SPDK's EXE (a binary of the build in SPDK) runs in.

    A copy of the build whose lib/ symlinks became small text files naming
    their target (as happens when a tree is copied without symlinks) is
    handled by linking them properly in TMP and pointing LD_LIBRARY_PATH
    there. When the libraries are still missing or no hugetlbfs is mounted,
    runs SPDK/setup as root (PAGES=max(pages, 1024)); raises Unusable when
    that is not possible or does not help. NOTE(msg) tells the user what
    was done."""
    if not os.path.isfile(exe):
        raise Unusable(f"{exe}: no such file")
    lib = os.path.join(spdk, "lib")
    env = dict(os.environ)
    fixed = []
    links = os.path.join(tmp, "spdk-lib")
    for name in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        path = os.path.join(lib, name)
        if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > 255:
            continue
        target = open(path, "rb").read().decode(errors="replace").strip()
        if re.fullmatch(r"[\w.+-]+", target) and os.path.isfile(os.path.join(lib, target)):
            os.makedirs(links, exist_ok=True)
            os.symlink(os.path.join(os.path.abspath(lib), target), os.path.join(links, name))
            fixed.append(name)
    if fixed:
        note(f"SPDK lib/: {len(fixed)} symlinks stored as text files ({', '.join(fixed[:4])}"
             f"{', ...' if len(fixed) > 4 else ''}); linked in a temporary directory")
        env["LD_LIBRARY_PATH"] = links + (":" + env["LD_LIBRARY_PATH"]
                                          if env.get("LD_LIBRARY_PATH") else "")

    def missing():
        out = subprocess.run(["ldd", exe], capture_output=True, text=True, env=env, timeout=60)
        return [line.strip() for line in (out.stdout + out.stderr).splitlines()
                if "not found" in line or "error while loading" in line]

    mounted = any(line.split()[2] == "hugetlbfs" for line in open("/proc/mounts")
                  if len(line.split()) > 2)
    gone = missing()
    if gone or not mounted:
        why = f"{len(gone)} libraries missing" if gone else "hugetlbfs not mounted"
        if os.geteuid() != 0:
            raise Unusable(f"SPDK cannot run ({why}); run {spdk}/setup as root")
        note(f"SPDK: {why}; running {spdk}/setup")
        out = subprocess.run([os.path.join(spdk, "setup")], capture_output=True, text=True,
                             env=dict(os.environ, PAGES=str(max(pages, 1024))), timeout=900)
        if out.returncode != 0:
            raise Unusable(f"{spdk}/setup failed: {out.stderr.strip()[-2000:]}")
        note(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "SPDK setup done")
        gone = missing()
        if gone:
            raise Unusable(f"SPDK still cannot load: {'; '.join(gone[:3])}")
    return env
