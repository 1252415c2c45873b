#!/usr/bin/python3
"""make_hostile.py - the hand-ins of the hostile class that attack the reading
of a hand-in (tests/coursework/test_submissions.sh): each is written into SUBS
from the honest hand-in COMPLETE (a tarball from make submit).

    tests/coursework/hostile/make_hostile.py SUBS COMPLETE TEACHER_MD
"""
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

subs, complete, teacher_md = sys.argv[1:4]
with tarfile.open(complete) as t:
    files = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
manifest = json.loads(files["manifest.json"])
SA = "chapters/04_self_attention/self_attention.c"


def tarball(name, members, manifest_data=None, extra=()):
    """members: path -> bytes; manifest_data: the manifest (default: complete's, as student NAME's id)."""
    with tarfile.open(os.path.join(subs, name), "w:gz") as t:
        def add(info, data=None):
            t.addfile(info, io.BytesIO(data) if data is not None else None)
        if manifest_data is not None:
            data = manifest_data if isinstance(manifest_data, bytes) else json.dumps(manifest_data).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(data)
            add(info, data)
        for path, data in members.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            add(info, data)
        for info, data in extra:
            add(info, data)


def as_student(sid, **change):
    m = dict(manifest, student=sid)
    m.update(change)
    return m


def code_files():
    return {p: d for p, d in files.items() if p != "manifest.json"}


# manifests of the wrong types and values
tarball("submission-04-path-number.tar.gz", code_files(), as_student("path-number", files=[{"path": 5, "sha256": "0" * 64}]))
tarball("submission-04-path-null.tar.gz", code_files(), as_student("path-null", files=[{"path": None, "sha256": None}]))
tarball("submission-04-chapter-climb.tar.gz", code_files(),
        as_student("chapter-climb", chapter="04_self_attention/../03_dot_product_attention"))
tarball("submission-04-no-files.tar.gz", code_files(), as_student("no-files", files=[]))
tarball("submission-04-newline-id.tar.gz", code_files(), as_student("newline-id\n"))
tarball("submission-04-not-json.tar.gz", code_files(), b"{\"student\": ")
# a hand-in that takes another student's id, and one handed in twice under the same id
tarball("submission-04-thief.tar.gz", code_files(), as_student("complete"))
# ... older, so not graded but named in complete's row: by the manifest's time, and (no time in it) by the file's
tarball("submission-04-complete.tgz", code_files(), as_student("complete", submitted="2000-01-01T00:00:00Z"))
untimed = as_student("complete")
untimed.pop("submitted", None)
tarball("complete.tar.gz", code_files(), untimed)
os.utime(os.path.join(subs, "complete.tar.gz"), (946598400, 946598400))   # 1999-12-31
# members that are no plain files, or bombs
link = tarfile.TarInfo("ANSWERS.md")
link.type, link.linkname = tarfile.SYMTYPE, "/dev/zero"
tarball("submission-04-dev-zero-link.tar.gz", {SA: files[SA]}, as_student("dev-zero-link"), [(link, None)])
hard = tarfile.TarInfo("ANSWERS.md")
hard.type, hard.linkname = tarfile.LNKTYPE, SA
tarball("submission-04-hardlink.tar.gz", {SA: files[SA]}, as_student("hardlink"), [(hard, None)])
fifo = tarfile.TarInfo("ANSWERS.md")
fifo.type = tarfile.FIFOTYPE
tarball("submission-04-fifo-member.tar.gz", {SA: files[SA]}, as_student("fifo-member"), [(fifo, None)])
dev = tarfile.TarInfo("ANSWERS.md")
dev.type, dev.devmajor, dev.devminor = tarfile.CHRTYPE, 1, 5
tarball("submission-04-device.tar.gz", {SA: files[SA]}, as_student("device"), [(dev, None)])
setuid = tarfile.TarInfo("ANSWERS.md")
setuid.size, setuid.mode, setuid.uid, setuid.gid = 3, 0o4755, 0, 0
tarball("submission-04-setuid.tar.gz", {SA: files[SA]}, as_student("setuid"), [(setuid, b"hi\n")])
newline = tarfile.TarInfo("ANSWERS.md\nfake: 10 / 10  graded")
newline.size = 3
tarball("submission-04-newline-member.tar.gz", {SA: files[SA]}, as_student("newline-member"), [(newline, b"hi\n")])
big = b"\0" * (5 << 20)   # over the 4 MiB a file may hold (a 2 GiB ANSWERS.md is refused the same way)
tarball("submission-04-big-answers.tar.gz", dict(code_files(), **{"ANSWERS.md": big}), as_student("big-answers"))
many = {f"notes/{i}.txt": b"x" for i in range(201)}
tarball("submission-04-many-members.tar.gz", dict(code_files(), **many), as_student("many-members"))
heavy = {f"notes/{i}.bin": b"\0" * (4 << 20) for i in range(9)}
tarball("submission-04-heavy.tar.gz", dict(code_files(), **heavy), as_student("heavy"))
# a 64 GiB sparse member (GNU tar keeps the holes: a small tarball)
work = os.path.join(subs, "..", "sparse")
os.makedirs(work, exist_ok=True)
with open(os.path.join(work, "ANSWERS.md"), "wb") as f:
    f.truncate(64 << 30)
with open(os.path.join(work, "manifest.json"), "w") as f:
    json.dump(as_student("sparse"), f)
subprocess.run(["tar", "-C", work, "-cSzf", os.path.join(subs, "submission-04-sparse.tar.gz"), "manifest.json",
                "ANSWERS.md"], check=True)
os.remove(os.path.join(work, "ANSWERS.md"))
# folder hand-ins: manifest.json a folder; ANSWERS.md a link to TEACHER.md; a FIFO as ANSWERS.md
for name in ("manifest-folder", "answers-link", "answers-fifo"):
    root = os.path.join(subs, name)
    for path, data in code_files().items():
        os.makedirs(os.path.dirname(os.path.join(root, path)) or root, exist_ok=True)
        with open(os.path.join(root, path), "wb") as f:
            f.write(data)
os.makedirs(os.path.join(subs, "manifest-folder", "manifest.json"))
for name in ("answers-link", "answers-fifo"):
    with open(os.path.join(subs, name, "manifest.json"), "w") as f:
        json.dump(as_student(name), f)
    os.remove(os.path.join(subs, name, "ANSWERS.md"))
os.symlink(os.path.abspath(teacher_md), os.path.join(subs, "answers-link", "ANSWERS.md"))
os.mkfifo(os.path.join(subs, "answers-fifo", "ANSWERS.md"))
# entries of DIR itself: a FIFO, a link, a hidden name, a name with a newline
os.mkfifo(os.path.join(subs, "submission-04-fifo.tar.gz"))
os.symlink(os.path.abspath(complete), os.path.join(subs, "submission-04-link.tar.gz"))
with open(os.path.join(subs, ".sneaky.tar.gz"), "wb") as f:
    f.write(open(complete, "rb").read())
with open(os.path.join(subs, "evil\nzz: 10 - 10  graded"), "w") as f:
    f.write("x")
print(f"make_hostile: {len(os.listdir(subs))} entries in {subs}")
