#!/usr/bin/env python3
"""Ways out of gatehouse-run (issue 54), tried from inside the command.

    escape_probe.py handle PATH        prints PATH's file handle (outside)
    escape_probe.py probe              tries every way out, one line each:
                                       CASE escaped: WHAT | CASE held: WHY

The same probe runs outside any sandbox as the control (tests/run/escape.sh):
there every case must escape, so a case that stops escaping inside shows the
sandbox held, not that the probe was broken. Everything it needs comes in
through GH_* environment variables, made by escape.sh.
"""
import ctypes
import errno
import glob
import os
import signal
import socket
import struct
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MNT_DETACH = 2


def err():
    e = ctypes.get_errno()
    return f"{errno.errorcode.get(e, e)} ({os.strerror(e)})"


def handle(path):
    """name_to_handle_at(2): TYPE:HEX."""
    buf = ctypes.create_string_buffer(8 + 128)
    struct.pack_into("Ii", buf, 0, 128, 0)
    mount_id = ctypes.c_int()
    if libc.name_to_handle_at(AT_FDCWD, path.encode(), buf, ctypes.byref(mount_id), 0) != 0:
        sys.exit(f"name_to_handle_at {path}: {err()}")
    size, kind = struct.unpack_from("Ii", buf, 0)
    print(f"{kind}:{buf.raw[8:8 + size].hex()}")


def open_by_handle(spec, flags):
    kind, hexa = spec.split(":")
    data = bytes.fromhex(hexa)
    buf = ctypes.create_string_buffer(8 + len(data))
    struct.pack_into("Ii", buf, 0, len(data), int(kind))
    buf[8:8 + len(data)] = data
    mount = os.open(os.environ["GH_MOUNT"], os.O_RDONLY | os.O_DIRECTORY)
    fd = libc.open_by_handle_at(mount, buf, flags)
    e = err()
    os.close(mount)
    return fd, e


def forked(fn):
    """Runs fn in a child process (for the cases that change the process's
    own namespaces, which must not change the cases after them)."""
    def go():
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                ok, what = fn()
            except OSError as e:
                ok, what = False, f"{errno.errorcode.get(e.errno, e.errno)} ({e.strerror})"
            except Exception as e:
                ok, what = False, f"{type(e).__name__}: {e}"
            os.write(w, (("1" if ok else "0") + what).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 4096):
            data += chunk
        os.waitpid(pid, 0)
        text = data.decode(errors="replace")
        return text[:1] == "1", text[1:] or "the child said nothing"
    return go


def case(name, fn):
    try:
        out = fn()
    except OSError as e:
        out = (False, f"{errno.errorcode.get(e.errno, e.errno)} ({e.strerror})")
    except Exception as e:  # a probe that could not run says why
        out = (False, f"{type(e).__name__}: {e}")
    ok, what = out
    print(f"{name} {'escaped' if ok else 'held'}: {what}", flush=True)


def read_by_handle(var):
    def go():
        fd, e = open_by_handle(os.environ[var], os.O_RDONLY)
        if fd < 0:
            return False, f"open_by_handle_at: {e}"
        data = os.read(fd, 200)
        os.close(fd)
        return b"SECRET" in data, f"read {data[:40]!r}"
    return go


def append_by_handle():
    fd, e = open_by_handle(os.environ["GH_HANDLE_HOOK"], os.O_WRONLY | os.O_APPEND)
    if fd < 0:
        return False, f"open_by_handle_at: {e}"
    n = os.write(fd, b"echo planted-by-handle\n")
    os.close(fd)
    return n > 0, f"appended {n} bytes to .git/hooks/pre-commit"


def setns_connect():
    fd = os.open(f"/run/netns/{os.environ['GH_NETNS']}", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        return False, f"setns: {err()}"
    s = socket.create_connection(("127.0.0.1", int(os.environ["GH_NETNS_PORT"])), timeout=3)
    data = s.recv(100)
    return b"netns-secret" in data, f"connected in the named namespace: {data[:30]!r}"


def environ():
    # The victim's variable (the probe's own GH_MARKER is not a find).
    marker = b"SECRET_TOKEN=" + os.environ["GH_MARKER"].encode()
    seen = []
    for p in [f"/proc/{os.environ['GH_VICTIM']}/environ"] + glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(p, "rb") as f:
                if marker in f.read():
                    return True, f"read the marker in {p}"
        except OSError as e:
            seen.append(f"{p}: {e.strerror}")
    return False, (seen[0] if seen else "no process outside is visible")


def kill_outside():
    os.kill(int(os.environ["GH_VICTIM"]), signal.SIGTERM)
    return True, f"sent SIGTERM to {os.environ['GH_VICTIM']}"


def unix_connect(path):
    def go():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(path)
        data = s.recv(100)
        return b"unix-secret" in data, f"connected: {data[:30]!r}"
    return go


def rename_parent():
    os.rename("target", "target-moved")
    os.makedirs("target/release", exist_ok=True)
    with open("target/release/app", "w") as f:
        f.write("planted\n")
    return True, "renamed target, wrote a new target/release/app"


def other_proxy():
    """Reach the host server through any other run's proxy socket."""
    port = os.environ["GH_HOST_PORT"]
    tried = []
    for p in sorted(set(glob.glob("/tmp/gatehouse-run-*/*") + glob.glob(os.environ.get("TMPDIR", "/tmp") + "/gatehouse-run-*/*"))):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(3)
            s.connect(p)
            s.sendall(f"GET http://127.0.0.1:{port}/ HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            data = s.recv(4096)
            if b"host-secret" in data or b" 200 " in data:
                return True, f"through {p}"
            tried.append(f"{p}: {data[:20]!r}")
        except OSError as e:
            tried.append(f"{p}: {e.strerror}")
    if os.environ.get("GH_CONTROL"):
        # Outside, the host server itself is the control: it is reachable.
        s = socket.create_connection(("127.0.0.1", int(port)), timeout=3)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return b"host-secret" in s.recv(4096), "the host server, directly"
    return False, ("; ".join(tried) if tried else "no other run's socket is visible")


def write_case_variant():
    os.makedirs(".GIT/hooks", exist_ok=True)
    with open(".GIT/hooks/pre-commit", "w") as f:
        f.write("echo planted\n")
    return True, "wrote .GIT/hooks/pre-commit"


def case_variant_symlink():
    os.symlink("/tmp", ".Git")
    return True, "made the symbolic link .Git"


def case_variant_rename():
    os.makedirs("plain/hooks", exist_ok=True)
    os.rename("plain", ".gIT")
    return True, "renamed a folder to .gIT"


def case_variant_race():
    """Flip a path between a harmless name and .GiT while another thread
    makes a folder of it: a guard that checked the path and let the kernel
    read it again would lose this race."""
    import threading
    buf = ctypes.create_string_buffer(b"harmless-name")
    stop = time.time() + 1.5
    def flip():
        while time.time() < stop:
            ctypes.memmove(buf, b".GiT\0", 5)
            ctypes.memmove(buf, b"harmless-name\0", 14)
    t = threading.Thread(target=flip)
    t.start()
    while time.time() < stop:
        if libc.mkdir(buf, 0o755) == 0 and os.path.isdir("harmless-name"):
            os.rmdir("harmless-name")
    t.join()
    if os.path.exists(".GiT"):
        return True, "made .GiT by racing the check"
    return False, "the race made no .GiT"


def umount_protection():
    # Own user and mount namespaces first (where that is allowed), then
    # lift the read-only mount over .git.
    libc.unshare(CLONE_NEWUSER | CLONE_NEWNS)
    how = "umount .git: " + ("done" if libc.umount2(b".git", MNT_DETACH) == 0 else err())
    try:
        with open(".git/config", "a") as f:
            f.write("[core]\n\thooksPath = /tmp\n")
    except OSError as e:
        return False, f"{how}; then writing .git/config: {e.strerror}"
    return True, f"{how}; then wrote .git/config"


def abstract_connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect("\0" + os.environ["GH_ABSTRACT"])
    data = s.recv(100)
    return b"unix-secret" in data, f"connected: {data[:30]!r}"


def main():
    if sys.argv[1:2] == ["handle"]:
        handle(sys.argv[2])
        return
    case("handle-read-ssh", read_by_handle("GH_HANDLE_SSH"))
    case("handle-read-env", read_by_handle("GH_HANDLE_ENV"))
    case("handle-append-hook", append_by_handle)
    case("setns-named-netns", forked(setns_connect))
    case("proc-environ", environ)
    case("signal-outside", kill_outside)
    case("unix-socket-host", unix_connect(os.environ["GH_HOST_SOCK"]))
    case("unix-socket-abstract", abstract_connect)
    case("other-run-proxy", other_proxy)
    case("rename-parent", rename_parent)
    case("case-variant-git", write_case_variant)
    case("case-variant-symlink", case_variant_symlink)
    case("case-variant-rename", case_variant_rename)
    case("case-variant-race", case_variant_race)
    case("umount-protection", forked(umount_protection))
    time.sleep(0.2)


if __name__ == "__main__":
    main()
