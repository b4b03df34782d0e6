"""Runs Home Assistant core's Assist pipeline through Hark's Wyoming
services, as a Home Assistant install does, and prints what happened as
one JSON object. Run by tests/e2e/test_home_assistant.py with the Python
of tests/.venv-ha (Home Assistant core from PyPI; tests/setup.sh):

    assist.py CONFIG_DIR HOST PORT AUDIO.raw TTS_OUT.wav [WAKE_WORD]

AUDIO.raw is 16 kHz mono 16-bit PCM. Home Assistant adds the Wyoming
integration by HOST and PORT as the user would (its config flow asks
`describe`), makes a pipeline of the entities it found, streams the audio
through it (from the wake word stage when WAKE_WORD is given, else from
speech to text) and fetches the reply's audio, as a player would, into
TTS_OUT.wav."""

import asyncio
import json
import sys
from pathlib import Path

from homeassistant import bootstrap, runner
from homeassistant.components import assist_pipeline, stt, tts
from homeassistant.components.assist_pipeline.pipeline import (
    PipelineStage,
    async_create_default_pipeline,
    async_update_pipeline,
)
from homeassistant.core import Context

CONFIGURATION = """\
homeassistant:
  name: Hark test
  unit_system: metric
  time_zone: UTC
  latitude: 0
  longitude: 0
  elevation: 0
  country: US
assist_pipeline:
conversation:
media_source:
"""


async def main(config_dir, host, port, audio_path, out_path, wake_word):
    config_dir = Path(config_dir)
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "configuration.yaml").write_text(CONFIGURATION)
    hass = await bootstrap.async_setup_hass(
        runner.RuntimeConfig(
            config_dir=str(config_dir),
            # Every requirement is installed in the venv beforehand.
            skip_pip=True,
            safe_mode=False,
            recovery_mode=False,
            verbose=False,
            log_rotate_days=None,
            log_file=None,
            log_no_color=True,
            debug=False,
            open_ui=False,
        )
    )
    report = {}
    try:
        flow = await hass.config_entries.flow.async_init(
            "wyoming", context={"source": "user"}, data={"host": host, "port": port}
        )
        report["flow"] = {"type": str(flow.get("type")), "title": flow.get("title"), "reason": flow.get("reason")}
        await hass.async_block_till_done()
        entities = sorted(s.entity_id for s in hass.states.async_all())
        report["entities"] = [e for e in entities if e.startswith(("stt.", "tts.", "wake_word."))]
        stt_id = next(e for e in entities if e.startswith("stt."))
        tts_id = next(e for e in entities if e.startswith("tts."))
        pipeline = await async_create_default_pipeline(
            hass, stt_engine_id=stt_id, tts_engine_id=tts_id, pipeline_name="Hark"
        )
        start = PipelineStage.STT
        if wake_word:
            wake_id = next(e for e in entities if e.startswith("wake_word."))
            await async_update_pipeline(hass, pipeline, wake_word_entity=wake_id, wake_word_id=wake_word)
            start = PipelineStage.WAKE_WORD
        pcm = Path(audio_path).read_bytes()

        async def microphone():
            # 64 ms at a time, in real time, as a satellite streams: Home
            # Assistant keeps only the last moments of audio while the wake
            # word service looks, for speech to text to start from.
            loop = asyncio.get_running_loop()
            begun = loop.time()
            for n, at in enumerate(range(0, len(pcm), 2048)):
                yield pcm[at : at + 2048]
                await asyncio.sleep(max(0.0, begun + (n + 1) * 0.064 - loop.time()))

        events = []
        await assist_pipeline.async_pipeline_from_audio_stream(
            hass,
            context=Context(),
            event_callback=events.append,
            stt_metadata=stt.SpeechMetadata(
                language="en",
                format=stt.AudioFormats.WAV,
                codec=stt.AudioCodecs.PCM,
                bit_rate=stt.AudioBitRates.BITRATE_16,
                sample_rate=stt.AudioSampleRates.SAMPLERATE_16000,
                channel=stt.AudioChannels.CHANNEL_MONO,
            ),
            stt_stream=microphone(),
            pipeline_id=pipeline.id,
            tts_audio_output="wav",
            start_stage=start,
            end_stage=PipelineStage.TTS,
        )
        report["events"] = [{"type": str(e.type), "data": e.data} for e in events]
        done = next((e for e in events if str(e.type) == "tts-end"), None)
        if done is not None:
            # What a media player fetches: the speech made by Hark's TTS,
            # converted by Home Assistant to the format it asked for.
            extension, data = await tts.async_get_media_source_audio(hass, done.data["tts_output"]["media_id"])
            Path(out_path).write_bytes(data)
            report["tts_audio"] = {"extension": extension, "bytes": len(data)}
    finally:
        await hass.async_stop()
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0], args[1], int(args[2]), args[3], args[4], args[5] if len(args) > 5 else None))
