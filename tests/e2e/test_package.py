"""The Debian package end to end: image/make-deb builds hark_<version>_<arch>.deb
from the binary the other tests run and the model, voice and ONNX Runtime
tests/run sets up; these tests read it back with dpkg-deb, unpack it into a
directory standing in for a system's root, let systemd-sysusers and
systemd-tmpfiles (--root, no running systemd needed) do what postinst does,
and start the packaged binary on the packaged model, voice and runtime.

The package is built once for the module, with fast gzip instead of xz
(HARK_DEB_COMPRESSION), which make-deb offers for tests."""

import filecmp
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tomllib

import pytest

import harness
from harness import HARK, MODELS, ONNXRUNTIME, REPO, VOICES, WAKE, Daemon, LineClient, status_of

pytestmark = pytest.mark.skipif(
    not (shutil.which("dpkg-deb") and shutil.which("readelf")),
    reason="needs dpkg-deb (dpkg) and readelf (binutils) to build and read the package",
)

MAKE_DEB = REPO / "image" / "make-deb"
VERSION = tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["version"]
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), "amd64")
MODEL = "tiny.en-q8_0"
MODEL_FILE = f"ggml-{MODEL}.bin"
# The multilingual model beside it (stt.multilingual_model).
OTHER = "base-q8_0"
OTHER_FILE = f"ggml-{OTHER}.bin"
# The live engine and the end-of-turn model appliance/setup-models installs.
LIVE = "moonshine-tiny-en"
LIVE_FILES = ["LICENSE", "decoder_model_merged.ort", "encoder_model.ort", "tokenizer.bin"]
TURN = "smart-turn-v3.2"
TURN_FILE = f"{TURN}.onnx"
# Every model file the package ships, relative to the models directory.
MODEL_FILES = [MODEL_FILE, OTHER_FILE, TURN_FILE, *(f"{LIVE}/{f}" for f in LIVE_FILES)]
VOICE = "en_US-joe-medium"
# The wake word models (and their licence) under /usr/share/hark/wake.
WAKE_FILES = ["LICENSE", *(f"{w}.{x}" for w in ("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa")
                           for x in ("json", "tflite"))]
# The Debian package that provides each library a Hark binary may need.
LIBRARY_PACKAGES = {
    "libc.so.6": "libc6",
    "libm.so.6": "libc6",
    "libpthread.so.0": "libc6",
    "libdl.so.2": "libc6",
    "librt.so.1": "libc6",
    "ld-linux-x86-64.so.2": "libc6",
    "ld-linux-aarch64.so.1": "libc6",
    "libgcc_s.so.1": "libgcc-s1",
    "libstdc++.so.6": "libstdc++6",
    "libasound.so.2": "libasound2",
    "libespeak-ng.so.1": "libespeak-ng1",
    "libopusenc.so.0": "libopusenc0",
    "libopus.so.0": "libopus0",
    "libmp3lame.so.0": "libmp3lame0",
}


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, check=True, **kw)


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    env = dict(os.environ, HARK_DEB_COMPRESSION="-Zgzip -z1")
    made = subprocess.run(
        [
            MAKE_DEB, "--arch", ARCH, "--version", VERSION, "--binary", HARK,
            "--onnxruntime", ONNXRUNTIME.parent, "--models", MODELS, "--voices", VOICES, "--wake", WAKE,
            "--out", out,
        ],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert made.returncode == 0, made.stderr
    path = out / f"hark_{VERSION}_{ARCH}.deb"
    assert path.is_file(), (sorted(out.iterdir()), made.stderr)
    return path


@pytest.fixture(scope="module")
def root(deb, tmp_path_factory):
    """The package's files unpacked as they would land on a system, with the
    control files in DEBIAN/."""
    r = tmp_path_factory.mktemp("root") / "R"
    run("dpkg-deb", "-R", deb, r)
    return r


@pytest.fixture(scope="module")
def control_files(deb):
    """The control archive's members: name -> (mode, bytes)."""
    tar = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb)], capture_output=True, check=True, timeout=60).stdout
    files = {}
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        for m in t.getmembers():
            if m.isfile():
                files[m.name.removeprefix("./")] = (m.mode, t.extractfile(m).read())
    return files


@pytest.fixture(scope="module")
def contents(deb):
    """`dpkg-deb -c`: path -> (mode string, owner, link target or None)."""
    entries = {}
    for line in run("dpkg-deb", "-c", deb).stdout.splitlines():
        m = re.match(r"(\S+)\s+(\S+)\s+\d+\s+\S+\s+\S+\s+\.(/\S*?)/?(?: -> (\S+))?$", line)
        assert m, line
        mode, owner, path, target = m.groups()
        entries[path or "/"] = (mode, owner, target)
    return entries


def field(deb, name):
    return run("dpkg-deb", "--field", deb, name).stdout.strip()


def glibc_needed(binary):
    """The newest GLIBC_x.y symbol version the binary's dynamic symbols use."""
    versions = set(re.findall(r"GLIBC_([0-9][0-9.]*[0-9])", run("readelf", "-W", "--dyn-syms", binary).stdout))
    assert versions, "the binary uses no versioned glibc symbol"
    return max(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- 1. control fields ---------------------------------------------------------

def test_control_names_the_package_version_and_architecture(deb):
    """Package, Version (the workspace version) and Architecture are what
    make-deb was asked for."""
    assert field(deb, "Package") == "hark"
    assert field(deb, "Version") == VERSION
    assert field(deb, "Architecture") == ARCH
    info = run("dpkg-deb", "-I", deb).stdout
    assert re.search(r"^ Package: hark$", info, re.M), info


def test_depends_covers_every_library_the_binary_needs(deb, root):
    """Depends has a package for every NEEDED entry of the packaged binary,
    and libc6 at least as new as the newest GLIBC_ symbol version it uses, so
    apt refuses a system the binary cannot run on."""
    binary = root / "usr" / "bin" / "hark"
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", run("readelf", "-d", binary).stdout)
    assert "libc.so.6" in needed, needed
    unknown = [lib for lib in needed if lib not in LIBRARY_PACKAGES]
    assert not unknown, f"this test does not know the package of {unknown}"

    groups = [g.strip() for g in field(deb, "Depends").split(",")]
    # name -> the group it is an alternative in
    alternatives = {}
    for group in groups:
        for alt in group.split("|"):
            name = alt.strip().split(" ")[0]
            alternatives[name] = group
    for lib in needed:
        assert LIBRARY_PACKAGES[lib] in alternatives, (lib, groups)
    assert alternatives["libc6"] == f"libc6 (>= {glibc_needed(binary)})", groups


def test_the_images_base_holds_every_dependency(deb, tmp_path):
    """image/make-image installs the package offline on a cached base
    root filesystem, so each Depends group needs a package of the base's
    list (libc6 is in every Debian system): a new library the binary links
    fails here, through make-image's own check, not after a quarter of an
    hour of image build. A package needing one the base lacks is named."""
    check = lambda package: subprocess.run([str(REPO / "image" / "make-image"), "--deb", str(package),
                                            "--check-depends"], capture_output=True, text=True)
    ok = check(deb)
    assert ok.returncode == 0, ok.stderr
    # The same package asking for a library no base has.
    tree = tmp_path / "pkg"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True)
    control = tree / "DEBIAN" / "control"
    control.write_text(re.sub(r"^Depends: ", "Depends: libnot-in-the-base9, ", control.read_text(), flags=re.M))
    odd = tmp_path / "odd.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "-z1", "-b", str(tree), str(odd)], check=True, capture_output=True)
    refused = check(odd)
    assert refused.returncode == 1 and "libnot-in-the-base9" in refused.stderr, refused.stderr
    assert "libespeak-ng1" not in refused.stderr, refused.stderr


def test_the_binary_takes_no_log10f_from_glibc(root):
    """glibc 2.43 versioned `log10f` anew; a binary linking it cannot start
    on the appliance's trixie. Hark defines its own (appliance/src/main.rs)
    for the echo canceller's f32 logarithms; a binary that imports glibc's
    again would fail the image build only on arm64, so it fails here."""
    symbols = run("readelf", "-W", "--dyn-syms", root / "usr" / "bin" / "hark").stdout
    imported = [line for line in symbols.splitlines() if " UND " in line and re.search(r"\blog10f\b", line)]
    assert not imported, imported


# --- 2. contents -----------------------------------------------------------------

def test_conffiles_is_exactly_the_configuration(control_files):
    """Only /etc/hark/hark.toml is a conffile: an edited configuration survives
    upgrades, nothing else is held back."""
    _, text = control_files["conffiles"]
    assert text.decode().split() == ["/etc/hark/hark.toml"]


def test_maintainer_scripts_are_executable_shell(control_files, tmp_path):
    """postinst, prerm and postrm are in the package, executable and valid
    sh (dpkg runs them with /bin/sh, dash on Debian)."""
    for name in ("postinst", "prerm", "postrm"):
        assert name in control_files, sorted(control_files)
        mode, text = control_files[name]
        assert mode & 0o111 == 0o111, f"{name} mode {oct(mode)}"
        assert text.startswith(b"#!/bin/sh\n"), name
        script = tmp_path / name
        script.write_bytes(text)
        check = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
        assert check.returncode == 0, (name, check.stderr)


def test_package_holds_the_binary_runtime_service_and_store_files(contents, root):
    """Every file the appliance needs is in the package, owned by root, in its
    Debian place; ONNX Runtime is the bundled versioned library behind an
    unversioned symlink."""
    regular = {
        "/usr/bin/hark": "-rwxr-xr-x",
        "/etc/hark/hark.toml": "-rw-r--r--",
        "/usr/lib/systemd/system/hark.service": "-rw-r--r--",
        "/usr/lib/sysusers.d/hark.conf": "-rw-r--r--",
        "/usr/lib/tmpfiles.d/hark.conf": "-rw-r--r--",
        "/usr/lib/udev/rules.d/60-hark.rules": "-rw-r--r--",
        **{f"/usr/share/hark/models/{f}": "-rw-r--r--" for f in MODEL_FILES},
        "/usr/share/hark/models/manifest.json": "-rw-r--r--",
        f"/usr/share/hark/voices/{VOICE}.onnx": "-rw-r--r--",
        f"/usr/share/hark/voices/{VOICE}.onnx.json": "-rw-r--r--",
        **{f"/usr/share/hark/wake/{f}": "-rw-r--r--" for f in WAKE_FILES},
        "/usr/lib/hark/libtensorflowlite_c.so": "-rw-r--r--",
    }
    for path, mode in regular.items():
        assert path in contents, f"{path} is not in the package"
        assert contents[path][0] == mode, (path, contents[path])
    assert {owner for _, owner, _ in contents.values()} == {"root/root"}

    link = contents.get("/usr/lib/hark/libonnxruntime.so")
    assert link and link[0].startswith("l"), link
    target = link[2]
    assert re.fullmatch(r"libonnxruntime\.so\.1\.\d+\.\d+", target), target
    assert contents[f"/usr/lib/hark/{target}"][0] == "-rw-r--r--"
    assert (ONNXRUNTIME.parent / target).is_file(), "the versioned library tests/.voices/lib has"
    assert filecmp.cmp(root / "usr/lib/hark" / target, ONNXRUNTIME.parent / target, shallow=False)


def test_packaged_files_are_the_repository_and_store_files(root):
    """The unit, sysusers, tmpfiles and udev files are the repository's own,
    the conffile is image/deb/hark.toml, and the model and voice are the ones
    the stores hold, byte for byte."""
    same = {
        "usr/lib/systemd/system/hark.service": REPO / "systemd" / "hark.service",
        "usr/lib/sysusers.d/hark.conf": REPO / "systemd" / "hark.sysusers",
        "usr/lib/tmpfiles.d/hark.conf": REPO / "systemd" / "hark.tmpfiles",
        "usr/lib/udev/rules.d/60-hark.rules": REPO / "systemd" / "60-hark.rules",
        "etc/hark/hark.toml": REPO / "image" / "deb" / "hark.toml",
        **{f"usr/share/hark/models/{f}": MODELS / f for f in MODEL_FILES},
        f"usr/share/hark/voices/{VOICE}.onnx": VOICES / f"{VOICE}.onnx",
        f"usr/share/hark/voices/{VOICE}.onnx.json": VOICES / f"{VOICE}.onnx.json",
        **{f"usr/share/hark/wake/{f}": WAKE / ("LICENSE" if f == "LICENSE" else f"models/{f}") for f in WAKE_FILES},
        "usr/lib/hark/libtensorflowlite_c.so": WAKE / "lib" / "libtensorflowlite_c.so",
    }
    for packaged, source in same.items():
        assert filecmp.cmp(root / packaged, source, shallow=False), f"{packaged} differs from {source}"


# --- 3. the packaged configuration and manifest ---------------------------------------

def test_packaged_configuration_passes_config_check(root):
    """The conffile the package installs is valid for the binary it ships
    with."""
    check = subprocess.run(
        [str(root / "usr/bin/hark"), "config", "check", str(root / "etc/hark/hark.toml")],
        capture_output=True, text=True, timeout=60,
    )
    assert check.returncode == 0, check.stderr
    assert "is valid" in check.stdout, check.stdout


def test_packaged_manifest_describes_the_packaged_models(root):
    """The model manifest lists exactly the shipped models, each with its
    kind and the packaged files' checksums and sizes (every file of the
    Moonshine directory), and says where each came from without the build
    machine's paths."""
    model_dir = root / "usr/share/hark/models"
    manifest = json.loads((model_dir / "manifest.json").read_text())
    entries = {m["name"]: m for m in manifest["models"]}
    assert sorted(entries) == sorted([MODEL, OTHER, LIVE, TURN]), manifest
    assert manifest["version"] == 2, "kinds other than whisper need version 2"
    expected = {MODEL: ("whisper", MODEL_FILE, "en"), OTHER: ("whisper", OTHER_FILE, "multilingual"),
                LIVE: ("moonshine", LIVE, "en"), TURN: ("smart-turn", TURN_FILE, "any")}
    for name, (kind, file, language) in expected.items():
        entry = entries[name]
        assert (entry.get("kind", "whisper"), entry["file"], entry["language"]) == (kind, file, language), entry
        if kind == "moonshine":
            assert [f["name"] for f in entry["files"]] == LIVE_FILES, entry
            for f in entry["files"]:
                path = model_dir / LIVE / f["name"]
                assert (f["sha256"], f["size"]) == (sha256(path), path.stat().st_size), f
            assert entry["size"] == sum(f["size"] for f in entry["files"])
        else:
            assert entry["sha256"] == sha256(model_dir / file)
            assert entry["size"] == (model_dir / file).stat().st_size
        source = entry["source"]
        assert source, entry
        for leak in ("/root", "/tmp", "target/", "tests/", str(REPO)):
            assert leak not in source, f"source {source!r} names a build machine path ({leak})"
    # The licences the models' terms require travel with them.
    copyright = (root / "usr/share/doc/hark/copyright").read_text()
    assert "Files: usr/share/hark/models/smart-turn-v3.2.onnx" in copyright
    assert "License: BSD-2-Clause\n Redistribution and use" in copyright
    assert (model_dir / LIVE / "LICENSE").read_text().startswith("MIT License")


# --- 4. the account and the state directory -------------------------------------------

@pytest.fixture(scope="module")
def accounts(root):
    """systemd-sysusers in the root, as postinst runs it. The root starts
    with a Debian-like account database that has audio and dialout but no
    gpio or spi group (Raspberry Pi OS has those; plain Debian does not)."""
    etc = root / "etc"
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (etc / "group").write_text("root:x:0:\ndialout:x:20:\naudio:x:29:\n")
    for name in ("shadow", "gshadow"):
        (etc / name).write_text("")
        (etc / name).chmod(0o640)
    sysusers = subprocess.run(
        ["systemd-sysusers", f"--root={root}", str(root / "usr/lib/sysusers.d/hark.conf")],
        capture_output=True, text=True, timeout=60,
    )
    assert sysusers.returncode == 0, sysusers.stderr
    passwd = {line.split(":")[0]: line.split(":") for line in (etc / "passwd").read_text().splitlines()}
    group = {line.split(":")[0]: line.split(":") for line in (etc / "group").read_text().splitlines()}
    return passwd, group


def test_sysusers_creates_the_hark_account_in_the_hardware_groups(accounts):
    """The package's sysusers entry makes a system user hark with its own
    group and /var/lib/hark as home, creates the gpio and spi groups that are
    missing and puts hark in audio, gpio, spi and dialout."""
    passwd, group = accounts
    assert "hark" in passwd, passwd
    _, _, uid, gid, _, home, shell = passwd["hark"]
    assert 0 < int(uid) < 1000, "a system account"
    assert home == "/var/lib/hark"
    assert shell.endswith("nologin"), shell
    assert group["hark"][2] == gid, "hark's primary group is its own"
    for name in ("audio", "gpio", "spi", "dialout"):
        assert name in group, f"group {name} missing: {group}"
        assert "hark" in group[name][3].split(","), group[name]
    # Existing groups keep their ids.
    assert group["audio"][2] == "29" and group["dialout"][2] == "20"


def test_tmpfiles_links_the_packaged_model_and_voice_into_the_stores(root, accounts):
    """The package's tmpfiles entry makes /var/lib/hark/models and voices
    owned by hark, links the shipped model and voice into them (absolute
    links to /usr/share/hark, valid once the root is /), and copies the model
    manifest so the store can be added to."""
    passwd, _ = accounts
    tmpfiles = subprocess.run(
        ["systemd-tmpfiles", f"--root={root}", "--create", str(root / "usr/lib/tmpfiles.d/hark.conf")],
        capture_output=True, text=True, timeout=60,
    )
    assert tmpfiles.returncode == 0, tmpfiles.stderr
    state = root / "var/lib/hark"
    uid = int(passwd["hark"][2])
    for d in (state, state / "models", state / "voices"):
        assert d.is_dir() and not d.is_symlink(), d
        assert d.stat().st_uid == uid, f"{d} not owned by hark"
    links = {
        state / "models" / MODEL_FILE: f"/usr/share/hark/models/{MODEL_FILE}",
        state / "models" / OTHER_FILE: f"/usr/share/hark/models/{OTHER_FILE}",
        state / "models" / LIVE: f"/usr/share/hark/models/{LIVE}",
        state / "models" / TURN_FILE: f"/usr/share/hark/models/{TURN_FILE}",
        state / "voices" / f"{VOICE}.onnx": f"/usr/share/hark/voices/{VOICE}.onnx",
        state / "voices" / f"{VOICE}.onnx.json": f"/usr/share/hark/voices/{VOICE}.onnx.json",
    }
    for link, target in links.items():
        assert link.is_symlink(), link
        assert os.readlink(link) == target
        assert (root / target.lstrip("/")).exists(), f"{target} is not in the package"
    manifest = state / "models" / "manifest.json"
    assert manifest.is_file() and not manifest.is_symlink()
    assert manifest.read_bytes() == (root / "usr/share/hark/models/manifest.json").read_bytes()


# --- 5. the packaged binary runs on the packaged files ------------------------------------

def test_packaged_binary_serves_with_packaged_model_voice_and_runtime(root, tmp_path_factory, monkeypatch):
    """The packaged (stripped) binary starts through the harness on the
    packaged ONNX Runtime (through its unversioned symlink), models and
    voice: speech to text is ready on tiny.en-q8_0, the live engine on
    Moonshine and the end of turn on Smart Turn (both by their store names),
    and text to speech on the piper voice, not the espeak-ng fallback. The
    packaged files are only read."""
    tmp = tmp_path_factory.mktemp("hark-deb")  # short: the Unix socket's path lives under it
    share = root / "usr/share/hark"
    before = sorted(p.relative_to(share) for p in share.rglob("*"))
    # The voice store records the voices it finds in its manifest.json
    # (which the package does not ship), so it gets a writable store laid
    # out as tmpfiles does on a system: links to the packaged files (here
    # inside the root, not /usr/share).
    voices = tmp / "voices"
    voices.mkdir()
    for name in (f"{VOICE}.onnx", f"{VOICE}.onnx.json"):
        (voices / name).symlink_to(share / "voices" / name)
    monkeypatch.setattr(harness, "HARK", root / "usr/bin/hark")
    daemon = Daemon(
        tmp / "hark",
        {
            # Both off by default; named here to load the packaged ones.
            "stt": {"models_dir": str(share / "models"), "live_model": LIVE, "turn_model": TURN},
            "audio.vad": {"end_of_turn": "smart-turn"},
            "tts": {"onnxruntime": str(root / "usr/lib/hark/libonnxruntime.so"), "voices_dir": str(voices)},
            "wake": {"enabled": True, "models_dir": str(share / "wake"),
                     "runtime": str(root / "usr/lib/hark/libtensorflowlite_c.so")},
        },
    ).start(timeout=60)
    try:
        assert daemon.proc.args[0] == str(root / "usr/bin/hark")
        c = LineClient.tcp(daemon, timeout=30)
        c.initialize()
        subsystems = status_of(c)["subsystems"]
        c.close()
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()
    assert subsystems["stt"].startswith("ready"), subsystems
    assert MODEL in subsystems["stt"], subsystems
    assert f"live: ready, model {LIVE} (moonshine)" in subsystems["stt"], subsystems
    assert "end of turn: smart-turn" in subsystems["stt"], subsystems
    assert "piper" in subsystems["tts"] and VOICE in subsystems["tts"], subsystems
    assert "espeak" not in subsystems["tts"], subsystems
    assert subsystems["wake"].startswith("listening for okay_nabu"), subsystems
    assert sorted(p.relative_to(share) for p in share.rglob("*")) == before, "the daemon wrote into /usr/share/hark"
