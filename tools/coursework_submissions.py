#!/usr/bin/python3
"""coursework_submissions.py - the teacher's side of the coursework: grade a
folder of hand-ins into a gradebook and one feedback file per student
(make grade-submissions DIR=...).

A hand-in is a tarball from make submit (tools/coursework_submit.py:
manifest.json and the student's files), the same unpacked into a folder, or
a whole student tree (a folder with coursework.json). Every hand-in is
untrusted data and its code untrusted code:

 1. per chapter, once per batch, the solution tree (tools/coursework.py
    --keep all) is written and built where no student process ever looks,
    and its grader records the values every check compares, hidden checks
    included (grade_NN --hidden SEED --record FILE; tests/coursework/grade.h);
    the student tree (every exercise a stub) is written and built beside it;
 2. a hand-in is read with caps (members, sizes, ANSWERS.md), a manifest of
    the right types, a chapter of this course, an id that must match its file
    name (submission-NN-<id>.tar.gz, <id>.tar.gz or a folder <id>) and, with
    --roster, be on the roster; links, devices, FIFOs and setuid files are
    refused, and so is a manifest that lists no file;
 3. a copy of the student tree gets the hand-in's exercise files (nothing
    else of it) and is built inside a sandbox (bwrap: no network, no view of
    anything but that copy and the system's programs, limits on CPU time,
    memory, processes and file size);
 4. each exercise runs in a sandbox of its own, the copy read-only, and its
    grader writes the values of its checks to a folder only this process
    reads; this process compares them with the solution's (the solution's
    tolerances) and decides. Nothing the student's program prints, nor its
    exit status, makes a check pass. All or nothing per exercise. Each
    exercise is graded alone: for exercise X the copy is rebuilt with every
    other exercise's part (between its markers) the solution's, so a mistake
    elsewhere never costs X its points (a hand-in whose markers do not match,
    or whose X does not build that way, is graded with its own parts, noted).

A hand-in that cannot be read gets one row "not graded: <reason>"; one that
does not build, crashes, loops or runs out of a limit gets a row that says
so, and the batch goes on. Written under --out once no student process is
left: gradebook.csv (student, chapter, status, points per exercise, points,
max, bonus, first failure, source, submitted, other hand-ins: one row per
student and chapter, for the newest hand-in by its manifest's time, or its
file's when it has none; the others are named, not graded),
feedback/<student>.txt, answers/<student>.md
(ANSWERS.md, to mark by hand), seed.txt (the same seed grades the same).
Without bwrap this refuses to run unless --unsandboxed is given
(tests/coursework/TEACHER.md: what the sandbox promises).

    tools/coursework_submissions.py DIR [--out out/gradebook] [--seed N]
        [--roster students.csv] [--time-limit 120] [--build-limit 600]
        [--work DIR] [--unsandboxed] [--bwrap PATH]
"""
import argparse
import csv
import datetime
import hashlib
import json
import math
import os
import re
import resource
import secrets
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coursework          # noqa: E402  (chapters)
import coursework_grade    # noqa: E402  (describe, part_names)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRADER_PREFIXES = ("tests/coursework/", "tools/coursework_grade.py", "tools/coursework_submit.py")
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")   # the whole id (fullmatch)
SHA256 = re.compile(r"[0-9a-f]{64}")
TARBALL = re.compile(r"(.*)\.(tar\.gz|tgz|tar)")
NAMED = re.compile(r"submission-(\d\d)-(.*)")

# caps on what a hand-in may hold
MAX_TARBALL = 64 << 20         # bytes of a tarball as handed in
MAX_MEMBERS = 200              # files and folders in a hand-in
MAX_MEMBER = 4 << 20           # bytes of one file
MAX_UNPACKED = 32 << 20        # bytes of all its files
MAX_MANIFEST = 1 << 20
MAX_ANSWERS = 256 << 10        # ANSWERS.md
MAX_PATH = 255
MAX_LOG = 1 << 20              # bytes of a build's or run's output read back
# limits of one sandboxed process tree
SANDBOX_UID = 65534            # nobody, when the teacher runs as root
ADDRESS_SPACE = 2 << 30
FILE_SIZE = 32 << 20
PROCESSES = 64
OPEN_FILES = 256
TMP_SIZE = 64 << 20


class NotGraded(Exception):
    """A hand-in that cannot be graded: its row says why."""


def shown(text):
    """text with control characters and other unprintables as \\xNN: safe on a console and in a CSV."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                   for c in str(text))


def shown_lines(text):
    return "\n".join(shown(line) for line in text.splitlines())


def bad_name(name):
    """Why a member or file name cannot be taken, or None."""
    if not name or len(name) > MAX_PATH:
        return f"a name of {len(name)} characters (at most {MAX_PATH})"
    if any(not c.isprintable() for c in name):
        return f"the name {shown(name)!r} holds control characters"
    if name.startswith("/") or ".." in name.split("/"):
        return f"the path {shown(name)!r} leaves the hand-in"
    return None


def clean_path(name):
    """A member path without './' parts; NotGraded when it cannot be taken."""
    why = bad_name(name)
    if why:
        raise NotGraded(why)
    return "/".join(p for p in name.split("/") if p not in ("", "."))


def read_capped(path, cap, what):
    """The bytes of a regular file, never following a link nor blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise NotGraded(f"{what} cannot be read ({'a symbolic link' if e.errno == 40 else e.strerror})")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotGraded(f"{what} is not a regular file (a folder, device, FIFO or socket)")
        if st.st_nlink > 1:
            raise NotGraded(f"{what} is a hard link")
        if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            raise NotGraded(f"{what} has a setuid or setgid bit")
        if st.st_size > cap:
            raise NotGraded(f"{what} is {st.st_size} bytes (at most {cap})")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(cap + 1)
        if len(data) > cap:
            raise NotGraded(f"{what} is over {cap} bytes")
        return data
    finally:
        os.close(fd)


def read_under(root, rel, cap):
    """rel under root, every folder on the way a real folder (no link out of the hand-in)."""
    where = root
    for part in rel.split("/")[:-1]:
        where = os.path.join(where, part)
        try:
            st = os.lstat(where)
        except OSError:
            raise NotGraded(f"{rel} is not in the hand-in")
        if not stat.S_ISDIR(st.st_mode):
            raise NotGraded(f"{rel}: {part} is not a folder (a link?)")
    if not os.path.lexists(os.path.join(root, rel)):
        raise NotGraded(f"{rel} is not in the hand-in")
    return read_capped(os.path.join(root, rel), cap, rel)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def log_text(path):
    """At most MAX_LOG bytes of a log, as text."""
    try:
        with open(path, "rb") as f:
            return f.read(MAX_LOG).decode("utf-8", errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------ the sandbox

class Sandbox:
    """Runs a student's build or grader: in bwrap, or (--unsandboxed) as this user with limits only."""

    def __init__(self, bwrap, unsandboxed):
        self.bwrap, self.unsandboxed = bwrap, unsandboxed
        self.as_nobody = os.geteuid() == 0

    def argv(self, cmd, tree, writable, out):
        if self.unsandboxed:
            return [tree + c[len("/hand-in"):] if c.startswith("/hand-in") else
                    (out or "/nonexistent") + c[len("/out"):] if c.startswith("/out/") else c for c in cmd]
        a = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
             "--new-session", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = "/" + top
            if os.path.islink(path):
                a += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                a += ["--ro-bind", path, path]
        if os.path.isdir("/etc/alternatives"):   # Debian's cc, c++, ... are links through it
            a += ["--ro-bind", "/etc/alternatives", "/etc/alternatives"]
        a += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_SIZE), "--tmpfs", "/tmp",
              "--bind" if writable else "--ro-bind", tree, "/hand-in"]
        if out:
            a += ["--bind", out, "/out"]
        a += ["--chdir", "/hand-in", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
              "--setenv", "LC_ALL", "C", "--setenv", "OMP_NUM_THREADS", "1", "--"]
        return a + cmd

    def limits(self, cpu):
        """The child's limits (and, as root, its user: nobody)."""
        def apply():
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))
            resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if self.as_nobody and not self.unsandboxed:
                os.setgroups([])
                os.setgid(SANDBOX_UID)
                os.setuid(SANDBOX_UID)
                resource.setrlimit(resource.RLIMIT_NPROC, (PROCESSES, PROCESSES))
            else:   # counted over all of this user's processes
                mine = sum(1 for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == os.getuid())
                resource.setrlimit(resource.RLIMIT_NPROC, (mine + PROCESSES, mine + PROCESSES))
        return apply

    def give_file(self, path):
        if self.as_nobody and not self.unsandboxed:
            os.lchown(path, SANDBOX_UID, SANDBOX_UID)

    def give(self, path):
        """Hands a folder (and what it holds) to the sandbox's user."""
        if self.as_nobody and not self.unsandboxed:
            for folder, dirs, files in os.walk(path):
                os.lchown(folder, SANDBOX_UID, SANDBOX_UID)
                for n in dirs + files:
                    os.lchown(os.path.join(folder, n), SANDBOX_UID, SANDBOX_UID)

    def run(self, cmd, tree, log, wall, writable=False, out=None):
        """Runs cmd (paths /hand-in and /out) with its output in log (capped by
        the file size limit); kills everything it started after wall seconds.
        Returns the exit status, -signal, or None when it ran out of time."""
        with open(log, "wb") as f:
            p = subprocess.Popen(self.argv(cmd, tree, writable, out), cwd=tree, stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=self.limits(wall + 5),
                                 env=None if not self.unsandboxed else {
                                     "PATH": "/usr/bin:/bin", "HOME": tree, "LC_ALL": "C", "OMP_NUM_THREADS": "1"})
            try:
                code = p.wait(timeout=wall)
            except subprocess.TimeoutExpired:
                code = None
            try:   # bwrap's --die-with-parent and pid namespace take the rest with it
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        if code is not None and code > 128 and not self.unsandboxed:
            code = -(code - 128)   # bwrap: 128 + the signal that ended the student's program
        return code

    def works(self):
        """None when the sandbox starts here, else why not."""
        if self.unsandboxed:
            return None
        if not shutil.which(self.bwrap):
            return f"{self.bwrap} is not installed (Debian package bubblewrap; tools/deps.sh installs it)"
        tmp = tempfile.mkdtemp(prefix="attn_sandbox_probe.")
        try:
            os.chmod(tmp, 0o711)
            run = subprocess.run(self.argv(["true"], tmp, False, None), capture_output=True, text=True,
                                 preexec_fn=self.limits(10), timeout=60)
            return None if run.returncode == 0 else f"{self.bwrap} does not start here: {run.stderr.strip()}"
        except (OSError, subprocess.SubprocessError) as e:
            return f"{self.bwrap} does not start here: {e}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def leftovers(self):
        """Kills and counts processes of the sandbox's user still alive (none, with bwrap)."""
        if not self.as_nobody or self.unsandboxed:
            return 0
        found = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == SANDBOX_UID]
        for p in found:
            try:
                os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        return len(found)


def _uid_of(pid):
    """The real uid of a live process (None for a zombie: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                    return None
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


# ------------------------------------------------------------ recorded values

def read_values(path, cap):
    """A golden-format file (tests/golden/README.md) as name -> (shape, floats),
    read defensively: it may come from a student's program. Stops at the
    first broken record (a crash cuts the file short)."""
    out = {}
    try:
        with open(path, "rb") as f:
            data = f.read(cap)
    except OSError:
        return out
    if data[:8] != b"ATTNGOLD" or len(data) < 16:
        return out
    at = 16   # the count in the header is patched at close: not trusted
    while at + 4 <= len(data) and len(out) < 100000:
        (n,) = struct.unpack_from("<I", data, at)
        if n == 0 or n > 1024 or at + 4 + n + 8 > len(data):
            break
        name = data[at + 4:at + 4 + n].decode("ascii", errors="replace")
        at += 4 + n
        dtype, ndim = struct.unpack_from("<II", data, at)
        at += 8
        if dtype not in (0, 1) or ndim > 4 or at + 4 * ndim > len(data):
            break
        dims = struct.unpack_from(f"<{ndim}I", data, at)
        at += 4 * ndim
        count = math.prod(dims)
        if at + 4 * count > len(data):
            break
        values = struct.unpack_from(f"<{count}{'f' if dtype == 0 else 'i'}", data, at)
        at += 4 * count
        out[name] = (tuple(dims), values)
    return out


def index_text(flat, dims):
    idx = []
    for d in reversed(dims or (1,)):
        idx.append(flat % d)
        flat //= d
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def compare(got, want, rtol, atol):
    """(ok, worst index): |got - want| <= atol + rtol |want| everywhere (equal infinities pass, NaN fails)."""
    worst, worst_excess = 0, -1.0
    for i, (g, w) in enumerate(zip(got, want)):
        a = atol[i] if isinstance(atol, (list, tuple)) else atol
        if g == w:
            continue
        if math.isnan(g) or math.isnan(w) or math.isinf(g) or math.isinf(w):
            return False, i
        excess = abs(g - w) - (a + rtol * abs(w))
        if excess > 0 and excess > worst_excess:
            worst, worst_excess = i, excess
    return worst_excess < 0, worst


# ------------------------------------------------------------ a chapter's trees

class Chapter:
    """A chapter's solution tree (built, its values recorded for the seed) and
    its student tree (built), which each hand-in's copy starts from."""

    def __init__(self, work, chapter, seed, build_limit):
        self.chapter, self.nn = chapter, chapter[:2]
        teacher = os.path.join(work, "teacher")   # no sandbox ever sees it
        os.makedirs(teacher, mode=0o700, exist_ok=True)
        self.solution = self.write_tree(os.path.join(teacher, "solution"), keep=True)
        self.tree = self.write_tree(os.path.join(work, "stub"), keep=False)
        os.chmod(os.path.join(work, "stub"), 0o755)
        self.grader = f"build/coursework/grade_{self.nn}"
        for tree in (self.solution, self.tree):
            log = os.path.join(teacher, f"build-{self.nn}.log")
            print(f"grade-submissions: building chapter {self.nn}'s {'solution' if tree == self.solution else 'student'}"
                  f" tree", flush=True)
            if subprocess.run(["make", "-s", "-j2", "BUILD=build", "CI=", "STRICT=", "SAN=", self.grader], cwd=tree,
                              stdout=open(log, "w"), stderr=subprocess.STDOUT, env=clean_env()).returncode != 0:
                sys.exit(f"grade-submissions: chapter {self.nn}'s tree does not build (see {log})")
        self.sheet = json.load(open(os.path.join(self.tree, "coursework.json")))
        self.answers_template = open(os.path.join(self.tree, "ANSWERS.md"), "rb").read()
        values = os.path.join(teacher, f"solution-{self.nn}.bin")
        run = subprocess.run([os.path.join(self.solution, self.grader), "--hidden", str(seed), "--record", values],
                             cwd=self.solution, capture_output=True, text=True, env=clean_env())
        if run.returncode != 0:
            sys.exit(f"grade-submissions: the solution of chapter {self.nn} fails its own grader:\n{run.stdout[-2000:]}")
        self.values = read_values(values, 1 << 30)
        self.value_cap = FILE_SIZE
        # the checks of each exercise, in order: (name shown, its values' names)
        self.checks = {}
        counters = {}
        for line in run.stdout.splitlines():
            m = re.fullmatch(r"check (\d\d\.[a-z0-9_]+): (.*)", line)
            if not m:
                continue
            ex, name = m.groups()
            kind = "h" if name.startswith("hidden: ") else "v"
            k = counters.setdefault((ex, kind), 0)
            counters[(ex, kind)] = k + 1
            keys = (f"{ex}/{kind}{k}/", f"{ex}/{k}/") if kind == "h" else (f"{ex}/v{k}/",)
            names = [n for n in self.values if n.startswith(keys) and "#" not in n]
            if not names:
                sys.exit(f"grade-submissions: chapter {self.nn}'s check '{name}' of {ex} records no value, so this "
                         f"process could not decide it (tests/coursework/grade.h, record mode)")
            self.checks.setdefault(ex, []).append((name, kind, names))
        self.files = []
        for ex in self.sheet["exercises"]:
            if ex["id"] not in self.checks:
                sys.exit(f"grade-submissions: the solution's grader ran no check of {ex['id']}")
            for where in ex["where"]:
                if where.split(": ", 1)[0] not in self.files:
                    self.files.append(where.split(": ", 1)[0])

    def write_tree(self, out, keep):
        run = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "coursework.py"), "--chapter", self.nn,
                              "--out", out] + (["--keep", "all"] if keep else []), capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"grade-submissions: could not write chapter {self.nn}'s tree: {run.stderr.strip()}")
        return os.path.join(out, self.chapter)


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


# ------------------------------------------------------------ reading a hand-in

class HandIn:
    def __init__(self, entry):
        self.entry = entry          # its name in DIR
        self.name_id = None         # the id its name gives
        self.student, self.chapter = None, None
        self.files = {}             # path -> bytes: the exercise files and ANSWERS.md taken from it
        self.listed = set()         # every path its manifest lists
        self.graders = {}           # grader file path -> sha256 it claims
        self.notes = []
        self.time = None            # when it was handed in (seconds since 1970): the manifest's, or its file's
        self.time_from = "file"     # "manifest" or "file"
        self.error = None           # why it cannot be graded (NotGraded's text), once read


def name_id(entry):
    """(id, chapter NN or None) from the entry's name; NotGraded when it gives none."""
    m = TARBALL.fullmatch(entry)
    base = m.group(1) if m else entry
    named = NAMED.fullmatch(base)
    nn, ident = (named.group(1), named.group(2)) if named else (None, base)
    if not STUDENT_ID.fullmatch(ident):
        raise NotGraded(f"its name gives no student id (expected submission-NN-<id>.tar.gz, <id>.tar.gz or a "
                        f"folder <id>; an id is letters, digits, '.', '_' or '-', at most 64)")
    return ident, nn


def unpack(path):
    """The members of a tarball as path -> bytes, with the caps; NotGraded when one is refused."""
    st = os.lstat(path)
    if st.st_size > MAX_TARBALL:
        raise NotGraded(f"the tarball is {st.st_size} bytes (at most {MAX_TARBALL})")
    members, total = {}, 0
    try:
        with open(path, "rb") as raw, tarfile.open(fileobj=raw, mode="r|*") as tar:
            for m in tar:
                if len(members) >= MAX_MEMBERS:
                    raise NotGraded(f"more than {MAX_MEMBERS} members")
                name = clean_path(m.name)
                if m.isdir():
                    continue
                if m.issym() or m.islnk():
                    raise NotGraded(f"{shown(name)} is a link (links are refused)")
                if not m.isreg() or m.issparse():
                    raise NotGraded(f"{shown(name)} is not a regular file (a device, FIFO or sparse file)")
                if m.mode & 0o6000:
                    raise NotGraded(f"{shown(name)} has a setuid or setgid bit")
                if m.size > MAX_MEMBER:
                    raise NotGraded(f"{shown(name)} is {m.size} bytes (at most {MAX_MEMBER})")
                total += m.size
                if total > MAX_UNPACKED:
                    raise NotGraded(f"its files add up to more than {MAX_UNPACKED} bytes")
                if name in members:
                    raise NotGraded(f"{shown(name)} is in it twice")
                members[name] = tar.extractfile(m).read(MAX_MEMBER + 1)
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        raise NotGraded(f"the tarball cannot be unpacked ({shown(e)})")
    return members


def folder_members(root, wanted):
    """The wanted files of a folder hand-in, each read without following links."""
    return {p: read_under(root, p, MAX_MANIFEST if p == "manifest.json" else MAX_MEMBER) for p in wanted}


def manifest_of(data):
    """(student, chapter, {path: sha256}, {grader path: sha256}, submitted: seconds or None) from manifest.json,
    every field type-checked."""
    try:
        m = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise NotGraded(f"manifest.json is not JSON ({shown(e)})")

    def listing(key, required):
        items = m.get(key, [] if not required else None)
        if not isinstance(items, list):
            raise NotGraded(f"manifest.json: '{key}' must be a list of {{\"path\", \"sha256\"}}")
        out = {}
        for f in items:
            if not (isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("sha256"), str)
                    and SHA256.fullmatch(f["sha256"])):
                raise NotGraded(f"manifest.json: each of '{key}' must be {{\"path\": text, \"sha256\": 64 hex digits}}")
            path = clean_path(f["path"])
            if path in out:
                raise NotGraded(f"manifest.json lists {shown(path)} twice")
            out[path] = f["sha256"]
        return out

    if not isinstance(m, dict):
        raise NotGraded("manifest.json is not an object")
    student, chapter = m.get("student"), m.get("chapter")
    if not isinstance(student, str) or not STUDENT_ID.fullmatch(student):
        raise NotGraded(f"manifest.json: student {shown(student)!r} is not an id (letters, digits, '.', '_' or '-', "
                        f"at most 64)")
    if not isinstance(chapter, str):
        raise NotGraded("manifest.json: chapter must be a chapter's name, as text")
    files = listing("files", True)
    if not files:
        raise NotGraded("manifest.json lists no files")
    submitted = m.get("submitted")
    if submitted is not None:
        try:
            if not isinstance(submitted, str) or len(submitted) > 40:
                raise ValueError
            when = datetime.datetime.fromisoformat(submitted)
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.timezone.utc)
            submitted = when.timestamp()
        except (ValueError, OverflowError, OSError):
            raise NotGraded(f"manifest.json: submitted {shown(submitted)[:40]!r} is not a time "
                            f"(ISO 8601, e.g. 2026-01-31T12:00:00Z)")
    return student, chapter, files, listing("grader_files", False), submitted


def read_hand_in(h, path, chapters_known, need_files):
    """Fills in the HandIn h: its id, chapter and files; NotGraded when it cannot be taken
    (h keeps what was read so far). need_files(chapter) -> the chapter's exercise files."""
    entry = h.entry
    if entry.startswith("."):
        raise NotGraded("a hidden name (starts with '.')")
    why = bad_name(entry)
    if why:
        raise NotGraded(why)
    h.name_id, name_nn = name_id(entry)
    st = os.lstat(path)
    h.time = st.st_mtime
    if stat.S_ISLNK(st.st_mode):
        raise NotGraded("a symbolic link (links are refused)")
    if stat.S_ISREG(st.st_mode):
        if not TARBALL.fullmatch(entry):
            raise NotGraded("not a hand-in (expected a .tar.gz from make submit, or a folder)")
        members = unpack(path)
        get = members.get
        has_tree = False
    elif stat.S_ISDIR(st.st_mode):
        members = None
        has_tree = not os.path.lexists(os.path.join(path, "manifest.json")) and \
            os.path.lexists(os.path.join(path, "coursework.json"))

        def get(p):
            if not os.path.lexists(os.path.join(path, p)):
                return None
            return folder_members(path, [p])[p]
    else:
        raise NotGraded("not a file or folder (a device, FIFO or socket)")
    if has_tree:   # a whole student tree
        try:
            h.chapter = json.loads(get("coursework.json").decode("utf-8")).get("chapter")
        except (UnicodeDecodeError, ValueError, AttributeError) as e:
            raise NotGraded(f"coursework.json cannot be read ({shown(e)})")
        sid = get(".student")
        h.student = sid.decode("utf-8", errors="replace").strip() if sid is not None else h.name_id
        check_chapter(h, chapters_known, name_nn)
        for p in need_files(h.chapter):
            data = get(p)
            if data is not None:
                h.files[p] = data
        h.listed = set(h.files)
        if not h.files:
            raise NotGraded("the tree holds none of the chapter's files")
        h.time = max([h.time] + [os.lstat(os.path.join(path, p)).st_mtime for p in h.files])   # its newest file
    else:
        data = get("manifest.json")
        if data is None:
            raise NotGraded("no manifest.json (make submit writes one) and no coursework.json (a student tree)")
        h.student, h.chapter, listed, h.graders, submitted = manifest_of(data)
        if submitted is not None:
            h.time, h.time_from = submitted, "manifest"
        check_chapter(h, chapters_known, name_nn)
        h.listed = set(listed)
        for p in need_files(h.chapter):
            if p not in listed:
                continue
            data = get(p)
            if data is None:
                raise NotGraded(f"the manifest lists {shown(p)}, which is not in the hand-in")
            if sha256(data) != listed[p]:
                raise NotGraded(f"{shown(p)} does not match its sha256 in the manifest")
            h.files[p] = data
    if h.student != h.name_id:
        raise NotGraded(f"the hand-in says it is student {shown(h.student)!r}, its name says {h.name_id!r}")


def check_chapter(h, chapters_known, name_nn):
    if not isinstance(h.chapter, str) or h.chapter not in chapters_known:
        raise NotGraded(f"chapter {shown(h.chapter)!r} is not one of this course's "
                        f"({', '.join(sorted(chapters_known))})")
    if name_nn and name_nn != h.chapter[:2]:
        raise NotGraded(f"its name says chapter {name_nn}, its manifest {h.chapter}")


# ------------------------------------------------------------ grading one

def judge(chap, ex, values_path, log, code, time_limit):
    """What one exercise's sandboxed run is worth, decided here from the values
    its program wrote: the dict coursework_grade.describe reads."""
    r = {"passed": False, "ok": [], "failed": [], "missing": [], "died": None, "last": None}
    got = read_values(values_path, chap.value_cap)
    text = log_text(log)
    names = [name for name, _, _ in chap.checks[ex["id"]]]
    parts = coursework_grade.part_names(ex)
    for line in text.splitlines():   # only to say where it stopped, and which stubs are left: names we know
        if line.startswith(f"check {ex['id']}: ") and line[len(f"check {ex['id']}: "):] in names:
            r["last"] = line[len(f"check {ex['id']}: "):]
        m = re.match(rf"TODO: {re.escape(ex['id'])} is not written yet \(([A-Za-z_0-9]+)\(\)", line)
        if m and m.group(1) in parts and m.group(1) not in r["missing"]:
            r["missing"].append(m.group(1))
    reached = True
    for name, kind, value_names in chap.checks[ex["id"]]:
        why = None
        for n in value_names:
            dims, want = chap.values[n]
            what = n.split("/", 3)[-1]
            mine = got.get(n)
            if mine is None:
                why = f"{what}: no value (the program stopped before it)"
                break
            if mine[0] != dims:
                why = f"{what} has shape {list(mine[0])}, want {list(dims)}"
                break
            if n + "#want" in chap.values:   # counts held to the solution's expectation
                target, rtol, atol = chap.values[n + "#want"][1], 0.0, list(chap.values[n + "#atol"][1])
            else:
                tol = chap.values.get(n + "#tol", ((2,), (0.0, 0.0)))[1]
                target, rtol, atol = want, tol[0], tol[1]
            ok, worst = compare(mine[1], target, rtol, atol)
            if not ok:
                why = (f"{what} differs from the reference solution at {index_text(worst, dims)}: "
                       f"got {mine[1][worst]:.6g}" + (f", want {target[worst]:.6g}" if kind == "v" else ""))
                break
        if why is None:
            r["ok"].append(name)
        elif why.endswith("(the program stopped before it)") and code not in (0, 1):
            reached = False   # it died here or earlier: the died line says how
            break
        else:
            r["failed"].append([name, why])
    if code is None:
        r["died"] = f"did not finish in {time_limit} s (an endless loop?)"
    elif code < 0:
        r["died"] = f"crashed ({signal.Signals(-code).name if -code in signal.valid_signals() else -code})"
    elif code not in (0, 1):
        r["died"] = f"stopped with exit status {code}"
    if not reached and r["died"] is None:
        r["died"] = "stopped"
    r["passed"] = reached and not r["failed"] and r["died"] is None and \
        len(r["ok"]) == len(chap.checks[ex["id"]])
    if r["died"] is None:
        r["last"] = None
    return r


def build_errors(log, limit):
    text = log_text(log).replace("/hand-in/", "")
    lines = text.splitlines()
    errors = [line for line in lines if re.search(r": (fatal )?error: |undefined reference", line)]
    first = errors[0] if errors else (lines or ["make failed"])[-1]
    shown_part = errors[:20] + ["..."] + lines[-30:] if len(lines) > 50 else lines
    return shown(first[:300]), shown_lines("\n".join(shown_part))


def regions(text):
    """The exercise parts of a file's text: [(id, first body line, end marker line)], line indices, in order;
    None when its markers do not pair up (a student removed or changed one)."""
    out, open_part = [], None
    for i, line in enumerate(text.split("\n")):
        m, e = coursework.BEGIN.match(line), coursework.END.match(line)
        if m:
            if open_part:
                return None
            open_part = (m.group(2) + "." + m.group(3), i + 1)
        elif e:
            if not open_part or open_part[0] != e.group(1):
                return None
            out.append((open_part[0], open_part[1], i))
            open_part = None
    return None if open_part else out


def alone(text, solution, ident):
    """text with every exercise part but ident's replaced by the solution's part (the k-th part of an exercise by
    the solution's k-th); None when the parts of the two do not match up."""
    mine, theirs = regions(text), regions(solution)
    if mine is None or theirs is None or [r[0] for r in mine] != [r[0] for r in theirs]:
        return None
    lines, sol = text.split("\n"), solution.split("\n")
    for (ex, begin, end), (_, s_begin, s_end) in reversed(list(zip(mine, theirs))):
        if ex != ident:
            lines[begin:end] = sol[s_begin:s_end]
    return "\n".join(lines)


def alone_variants(chap, tree):
    """Each exercise graded alone: ({files: exercise indices}, own files, indices that cannot be). files is the
    hand-in's exercise files (as a tuple of (path, text)) with its part of the exercise linked with the
    solution's other exercises; exercises with the same files share one build. An exercise whose markers do not
    match the solution's (a student removed or changed one) keeps the hand-in's own files."""
    own = {p: open(os.path.join(tree, p), encoding="utf-8", errors="surrogateescape").read() for p in chap.files}
    solution = {p: open(os.path.join(chap.solution, p), encoding="utf-8").read() for p in chap.files}
    groups, unmatched = {}, []
    for i, ex in enumerate(chap.sheet["exercises"]):
        files = {p: alone(own[p], solution[p], ex["id"]) for p in chap.files}
        if any(t is None for t in files.values()):
            unmatched.append(i)
            files = own
        groups.setdefault(tuple(sorted(files.items())), []).append(i)
    return groups, own, unmatched


def write_files(tree, files, sandbox):
    for p, text in files.items():
        path = os.path.join(tree, p)   # never through a link (the copy's files are the sandbox's user's)
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        sandbox.give_file(path)


def run_one(chap, sandbox, hdir, tree, i, seed, time_limit):
    """Exercise i of the chapter run in its sandbox (the copy read-only) and judged here."""
    ex = chap.sheet["exercises"][i]
    out = os.path.join(hdir, f"out-{i}")
    os.makedirs(out)
    sandbox.give(out)
    run_log = os.path.join(hdir, f"run-{i}.log")
    code = sandbox.run([f"/hand-in/{chap.grader}", ex["id"], "--hidden", str(seed), "--record",
                        "/out/values.bin"], tree, run_log, time_limit, out=out)
    return judge(chap, ex, os.path.join(out, "values.bin"), run_log, code, time_limit)


def grade(h, chap, sandbox, copies, index, seed, time_limit, build_limit):
    """The row and the feedback of one readable hand-in (its copy under copies/)."""
    hdir = os.path.join(copies, str(index))
    shutil.rmtree(hdir, ignore_errors=True)
    os.makedirs(hdir)
    tree = os.path.join(hdir, "tree")
    shutil.copytree(chap.tree, tree, symlinks=True)
    for p in chap.files:
        if p in h.files:
            with open(os.path.join(tree, p), "wb") as f:
                f.write(h.files[p])
        else:
            h.notes.append(f"{p} missing: the stub stands in")
    extra = sorted(p for p in h.listed if p not in chap.files and p != "ANSWERS.md")
    if extra:
        h.notes.append(f"ignored (not an exercise file): {shown(', '.join(extra[:5]))}"
                       + (f" and {len(extra) - 5} more" if len(extra) > 5 else ""))
    changed = sorted(p for p, digest in h.graders.items() if p.startswith(GRADER_PREFIXES)
                     and (not os.path.isfile(os.path.join(chap.tree, p))
                          or sha256(open(os.path.join(chap.tree, p), "rb").read()) != digest))
    if changed:
        h.notes.append(f"grader files changed ({shown(', '.join(changed[:5]))}): ignored, graded with the teacher's")
    sandbox.give(tree)
    log = os.path.join(hdir, "build.log")
    code = sandbox.run(["make", "-s", "-j2", "BUILD=build", "CI=", "STRICT=", "SAN=", chap.grader], tree, log,
                       build_limit, writable=True)
    if code != 0:
        first, errors = build_errors(log, build_limit)
        status = "does not compile" if code is not None else f"build did not finish in {build_limit} s"
        return {"status": status, "points": {}, "first_failure": first}, "The build's errors:\n" + errors
    # each exercise graded alone: its part of the hand-in linked with the solution's other exercises
    groups, own, unmatched = alone_variants(chap, tree)
    own_key = tuple(sorted(own.items()))
    results, fallback, built = {}, [], own_key

    def build(files):
        write_files(tree, files, sandbox)
        return sandbox.run(["make", "-s", "-j2", "BUILD=build", "CI=", "STRICT=", "SAN=", chap.grader], tree,
                           os.path.join(hdir, "build-alone.log"), build_limit, writable=True) == 0

    for key in sorted(groups, key=lambda k: k == own_key, reverse=True):   # its own files (built) first
        if key != built:
            if not build(dict(key)):
                fallback += groups[key]
                continue
            built = key
        for i in groups[key]:
            results[i] = run_one(chap, sandbox, hdir, tree, i, seed, time_limit)
    if fallback:   # its part does not build with the solution's others: graded with its own
        if not build(own):
            first, errors = build_errors(os.path.join(hdir, "build-alone.log"), build_limit)
            return {"status": "does not compile", "points": {}, "first_failure": first}, \
                "The build's errors:\n" + errors
        for i in fallback:
            results[i] = run_one(chap, sandbox, hdir, tree, i, seed, time_limit)
    for i in sorted(set(fallback) | set(unmatched)):
        why = "its markers differ from the sheet's" if i in unmatched else "it does not build with the solution's"
        h.notes.append(f"{chap.sheet['exercises'][i]['id']} graded with the hand-in's own other exercises ({why})")
    points, feedback, first = {}, [], ""
    for i, ex in enumerate(chap.sheet["exercises"]):
        r = results[i]
        message = coursework_grade.describe(r, coursework_grade.part_names(ex))
        points[ex["id"]] = ex["points"] if r["passed"] else 0
        if not r["passed"] and not first:
            first = f"{ex['id']}: {message}"
        feedback.append(f"{ex['id']}: {points[ex['id']]} of {ex['points']} points: {message}")
        for name in r["ok"]:
            feedback.append(f"    passed  {name}")
        for name, why in r["failed"]:
            feedback.append(f"    FAILED  {name}: {why}")
        if r["died"]:
            feedback.append(f"    {r['died']}" + (f" in check '{r['last']}'" if r["last"] else ""))
        for part in r["missing"]:
            feedback.append(f"    not written yet: {part}()")
    return {"status": "graded", "points": points, "first_failure": first}, "\n".join(feedback)


def answers_note(h, chap, out, student):
    """Copies ANSWERS.md for the teacher; the feedback's line on it."""
    data = h.files.get("ANSWERS.md")
    if data is None:
        return "ANSWERS.md: not handed in"
    if data.replace(b"\r", b"").strip() == chap.answers_template.strip():
        return "ANSWERS.md: not answered (the template as given)"
    if len(data) > MAX_ANSWERS:
        return f"ANSWERS.md: {len(data)} bytes, over {MAX_ANSWERS}: not copied, not read"
    os.makedirs(os.path.join(out, "answers"), exist_ok=True)
    with open(os.path.join(out, "answers", f"{student}.md"), "wb") as f:
        f.write(data)
    return f"ANSWERS.md: handed in ({len(data.decode('utf-8', errors='replace').split())} words)"


def when(h):
    """The time a hand-in was handed in, as the gradebook shows it (UTC; '(file)' when its file's time stands in)."""
    text = datetime.datetime.fromtimestamp(h.time, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return text if h.time_from == "manifest" else text + " (file)"


def read_roster(path):
    """The ids of a roster CSV: its 'student' column, or its first."""
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        sys.exit(f"grade-submissions: --roster {path}: cannot be read ({e})")
    col = 0
    if rows and "student" in [c.strip().lower() for c in rows[0]]:
        col = [c.strip().lower() for c in rows[0]].index("student")
        rows = rows[1:]
    ids = []
    for i, r in enumerate(rows):
        ident = r[col].strip() if col < len(r) else ""
        if not STUDENT_ID.fullmatch(ident):
            sys.exit(f"grade-submissions: --roster {path}: row {i + 1}: {shown(ident)!r} is not an id "
                     f"(letters, digits, '.', '_' or '-', at most 64)")
        if ident in ids:
            sys.exit(f"grade-submissions: --roster {path}: {ident} is on it twice")
        ids.append(ident)
    if not ids:
        sys.exit(f"grade-submissions: --roster {path}: no student on it")
    return ids


# ------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="the folder of hand-ins (tarballs from make submit, unpacked ones, student trees)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "gradebook"), help="where the gradebook goes")
    ap.add_argument("--seed", type=int, help="the hidden checks' seed (default: a fresh random one)")
    ap.add_argument("--roster", help="a CSV of the class's ids (a 'student' column, or the first): others are not "
                    "graded, and each missing one gets a row")
    ap.add_argument("--time-limit", type=int, default=120, help="seconds per exercise of a hand-in")
    ap.add_argument("--build-limit", type=int, default=600, help="seconds for a hand-in's build")
    ap.add_argument("--work", help="scratch folder (default: a fresh one under /tmp, removed at the end)")
    ap.add_argument("--unsandboxed", action="store_true",
                    help="run the students' code as yourself, with limits but no sandbox (when bwrap cannot run)")
    ap.add_argument("--bwrap", default="bwrap", help="the bubblewrap program (default: bwrap on PATH)")
    args = ap.parse_args()
    if not os.path.isdir(args.dir):
        sys.exit(f"grade-submissions: DIR={args.dir}: expected a folder of hand-ins")
    sandbox = Sandbox(args.bwrap, args.unsandboxed)
    why = sandbox.works()
    if why:
        sys.exit(f"grade-submissions: {why}. The students' code would run as you, with your files in reach: "
                 f"install bubblewrap, or pass UNSANDBOXED=1 (--unsandboxed) to grade without a sandbox anyway")
    entries = sorted(os.listdir(args.dir))
    if not entries:
        sys.exit(f"grade-submissions: {args.dir} holds no hand-in")
    roster = read_roster(args.roster) if args.roster else None
    seed = args.seed if args.seed is not None else secrets.randbelow(2 ** 31)
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="attn_submissions."))
    os.makedirs(work, exist_ok=True)
    # the hand-ins' copies: where the sandbox's user (nobody, as root) can reach them to bind them, and
    # pass through without a listing; the work folder (the solution, its values) may be closed to it
    copies = tempfile.mkdtemp(prefix="attn_hand_ins.")
    os.chmod(copies, 0o711)
    os.makedirs(os.path.join(args.out, "feedback"), exist_ok=True)
    with open(os.path.join(args.out, "seed.txt"), "w") as f:
        f.write(f"{seed}\n")
    known = {name for name in coursework.chapters().values()}
    chapters, rows, taken, feedback_names = {}, [], {}, set()

    def chapter(name):
        if name not in chapters:
            chapters[name] = Chapter(work, name, seed, args.build_limit)
        return chapters[name]

    try:
        hand_ins = []   # every entry read first, so that each student's newest hand-in of a chapter is known
        for entry in entries:
            h = HandIn(entry)
            try:
                read_hand_in(h, os.path.join(args.dir, entry), known, lambda c: chapter(c).files + ["ANSWERS.md"])
                chapter(h.chapter)
                if roster is not None and h.student not in roster:
                    raise NotGraded(f"student {h.student} is not on the roster")
                taken.setdefault((h.student, h.chapter), []).append(h)
            except NotGraded as e:
                h.error = shown(e)
            except Exception as e:   # a hand-in this program did not foresee: its row, not the batch
                h.error = f"could not be graded ({type(e).__name__}: {shown(e)[:200]})"
            hand_ins.append(h)
        others = {}   # the graded hand-in's entry -> the student's other hand-ins of the chapter, newest first
        for group in taken.values():
            group.sort(key=lambda g: (g.time, os.lstat(os.path.join(args.dir, g.entry)).st_mtime, g.entry),
                       reverse=True)
            others[group[0].entry] = group[1:]
        for index, h in enumerate(hand_ins):
            entry, chap = h.entry, None
            if h.error is None and h.entry not in others:
                continue   # an older hand-in: named in the newest one's row
            try:
                if h.error is not None:
                    raise NotGraded(h.error)
                chap = chapter(h.chapter)
                row, feedback = grade(h, chap, sandbox, copies, index, seed, args.time_limit, args.build_limit)
            except NotGraded as e:
                row, feedback = {"status": "not graded", "points": {}, "first_failure": shown(e)}, shown(e)
            except Exception as e:   # a hand-in this program did not foresee: its row, not the batch
                why = f"could not be graded ({type(e).__name__}: {shown(e)[:200]})"
                row, feedback = {"status": "not graded", "points": {}, "first_failure": why}, why
            left = sandbox.leftovers()   # none, with bwrap: its pid namespace ends with the run
            if left:
                h.notes.append(f"{left} of its processes outlived their sandbox: killed")
            graded = row["status"] != "not graded"
            student = h.student if graded else (h.name_id or shown(entry))
            if h.notes and graded:
                row["status"] += "; " + "; ".join(h.notes)
            bonus_ids = {ex["id"] for ex in chap.sheet["exercises"] if ex.get("bonus")} if chap and graded else set()
            row.update(student=student, chapter=h.chapter if graded else (h.chapter if isinstance(h.chapter, str)
                                                                          and h.chapter in known else ""),
                       source=shown(entry), chap=chap if graded else None,
                       total=sum(p for i, p in row["points"].items() if i not in bonus_ids),
                       bonus=sum(p for i, p in row["points"].items() if i in bonus_ids),
                       max=chap.sheet["total"] if chap and graded else "",
                       submitted=when(h) if graded else "",
                       others="; ".join(shown(o.entry) for o in others.get(entry, [])))
            rows.append(row)
            if graded:
                feedback += "\n\n" + answers_note(h, chap, args.out, student)
                for o in others.get(entry, []):
                    feedback += f"\nAlso handed in, not graded (older than {shown(entry)}): {shown(o.entry)} ({when(o)})"
            fname = re.sub(r"[^A-Za-z0-9._-]", "_", student)[:64].lstrip(".") or "entry"
            while fname in feedback_names:
                fname += "_"
            feedback_names.add(fname)
            with open(os.path.join(args.out, "feedback", f"{fname}.txt"), "w") as f:
                f.write(f"Coursework feedback: {student}, {row['chapter'] or 'chapter unknown'} ({shown(entry)})\n")
                f.write(f"Points: {row['total']} of {row['max'] or '?'}"
                        f"{'; bonus ' + str(row['bonus']) if chap and chap.sheet.get('bonus') and graded else ''}"
                        f"; {row['status']}\n\n{feedback}\n")
            print(f"{student}: {row['total']} / {row['max'] or '?'}  {row['status']}"
                  f"{'  (' + row['first_failure'] + ')' if row['first_failure'] else ''}", flush=True)
    finally:
        left = sandbox.leftovers()
        shutil.rmtree(copies, ignore_errors=True)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if left:
        print(f"grade-submissions: {left} sandboxed processes were still running; killed", flush=True)
    for ident in roster or []:
        if not any(r["student"] == ident for r in rows):
            rows.append({"student": ident, "chapter": "", "status": "not handed in", "points": {}, "total": 0,
                         "bonus": 0, "max": "", "first_failure": "", "source": "", "chap": None, "submitted": "",
                         "others": ""})
    ids = []
    for row in rows:
        for ex in (row["chap"].sheet["exercises"] if row["chap"] else []):
            if ex["id"] not in ids:
                ids.append(ex["id"])
    path = os.path.join(args.out, "gradebook.csv")
    with open(path, "w", newline="") as f:   # written now: every student process has ended
        w = csv.writer(f)
        w.writerow(["student", "chapter", "status", *ids, "points", "max", "bonus", "first failure", "source",
                    "submitted", "other hand-ins"])
        for row in rows:
            mine = {ex["id"] for ex in row["chap"].sheet["exercises"]} if row["chap"] else set()
            cells = [row["points"].get(i, 0) if i in mine else "" for i in ids]
            w.writerow([row["student"], row["chapter"], row["status"], *cells, row["total"], row["max"], row["bonus"],
                        row["first_failure"], row["source"], row["submitted"], row["others"]])
    print(f"gradebook: {os.path.relpath(path, os.getcwd())} ({len(rows)} rows, seed {seed}"
          f"{', UNSANDBOXED' if args.unsandboxed else ''}); feedback: "
          f"{os.path.relpath(os.path.join(args.out, 'feedback'), os.getcwd())}/")


if __name__ == "__main__":
    main()
