//! CTranslate2 whisper → whisper.cpp ggml (f16, or quantised q8_0 / q5_0 /
//! q5_1 / q4_0).
//!
//! Model hubs are out of reach on the machines Hark is built on, but a
//! package registry ships whisper tiny.en in CTranslate2's format. This maps
//! it onto whisper.cpp's tensor names and file layout:
//!
//! - self-attention `linear_0` stacks Q, K and V by rows; cross-attention
//!   has Q alone (`linear_0`) and a fused [K; V] (`linear_1`); the output
//!   projection is `linear_1` (self) or `linear_2` (cross). CTranslate2's key
//!   bias is all zeros and is not written: whisper.cpp has no key-bias tensor.
//! - 1-D tensors, convolution biases (as n×1) and positional embeddings are
//!   f32; every other tensor (2-D weights, convolution kernels) f16.
//! - The mel filterbank is computed ([`crate::mel`]); the vocabulary's byte
//!   stand-ins are decoded ([`crate::vocab`]) for entries 0–50256, and
//!   whisper.cpp derives the special tokens after them.
//! - Quantised files are what whisper.cpp's `quantize` tool makes of the f16
//!   file: every 2-D tensor except the convolution biases and positional
//!   embeddings goes through ggml's own `ggml_quantize_chunk`, and the
//!   header's ftype carries ggml's quantisation version.

use std::{
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use crate::{
    ct2::{Ct2Error, Ct2Model, Variable},
    mel, vocab,
};

/// whisper.cpp's file magic, "ggml" as a little-endian u32.
pub const GGML_MAGIC: u32 = 0x6767_6d6c;
/// Vocabulary entries written; whisper.cpp adds the special tokens itself.
pub const BASE_VOCAB: usize = 50_257;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Ct2(#[from] Ct2Error),
    #[error("not a whisper model: {0}")]
    NotWhisper(String),
    #[error(
        "cannot quantise `{tensor}` to {quantisation}: its rows of {row} values are not a multiple of {block}"
    )]
    Quantise {
        tensor: String,
        quantisation: Quantisation,
        row: usize,
        block: usize,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The weight formats an imported model can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quantisation {
    F16,
    Q8_0,
    Q5_1,
    Q5_0,
    Q4_0,
}

impl Quantisation {
    pub const ALL: [Quantisation; 5] = [
        Quantisation::F16,
        Quantisation::Q8_0,
        Quantisation::Q5_1,
        Quantisation::Q5_0,
        Quantisation::Q4_0,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Quantisation::F16 => "f16",
            Quantisation::Q8_0 => "q8_0",
            Quantisation::Q5_1 => "q5_1",
            Quantisation::Q5_0 => "q5_0",
            Quantisation::Q4_0 => "q4_0",
        }
    }

    /// The ggml tensor type quantised tensors are stored as.
    fn ggml_type(self) -> whisper_rs_sys::ggml_type {
        use whisper_rs_sys as sys;
        match self {
            Quantisation::F16 => sys::ggml_type_GGML_TYPE_F16,
            Quantisation::Q8_0 => sys::ggml_type_GGML_TYPE_Q8_0,
            Quantisation::Q5_1 => sys::ggml_type_GGML_TYPE_Q5_1,
            Quantisation::Q5_0 => sys::ggml_type_GGML_TYPE_Q5_0,
            Quantisation::Q4_0 => sys::ggml_type_GGML_TYPE_Q4_0,
        }
    }

    /// The header's ftype: ggml's "mostly X" file type, plus the
    /// quantisation format version for quantised files, as whisper.cpp's
    /// quantiser writes it (the loader checks it).
    pub fn header_ftype(self) -> i32 {
        use whisper_rs_sys as sys;
        let (ftype, versioned) = match self {
            Quantisation::F16 => (sys::ggml_ftype_GGML_FTYPE_MOSTLY_F16, false),
            Quantisation::Q8_0 => (sys::ggml_ftype_GGML_FTYPE_MOSTLY_Q8_0, true),
            Quantisation::Q5_1 => (sys::ggml_ftype_GGML_FTYPE_MOSTLY_Q5_1, true),
            Quantisation::Q5_0 => (sys::ggml_ftype_GGML_FTYPE_MOSTLY_Q5_0, true),
            Quantisation::Q4_0 => (sys::ggml_ftype_GGML_FTYPE_MOSTLY_Q4_0, true),
        };
        let version = if versioned {
            sys::GGML_QNT_VERSION * sys::GGML_QNT_VERSION_FACTOR
        } else {
            0
        };
        ftype + version as i32
    }
}

impl std::fmt::Display for Quantisation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Quantisation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantisation::ALL
            .into_iter()
            .find(|q| q.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = Quantisation::ALL.iter().map(|q| q.as_str()).collect();
                format!(
                    "unknown quantisation `{s}`; use one of {}",
                    names.join(", ")
                )
            })
    }
}

/// Tensors whisper.cpp's quantiser leaves as they are, whatever their shape.
const NOT_QUANTISED: [&str; 4] = [
    "encoder.conv1.bias",
    "encoder.conv2.bias",
    "encoder.positional_embedding",
    "decoder.positional_embedding",
];

/// Quantises one tensor's rows with ggml's own quantiser.
pub fn quantise(
    name: &str,
    rows: usize,
    row: usize,
    data: &[f32],
    quantisation: Quantisation,
) -> Result<Vec<u8>, ImportError> {
    use whisper_rs_sys as sys;
    let ty = quantisation.ggml_type();
    // SAFETY: pure functions of the type id.
    let block = unsafe { sys::ggml_blck_size(ty) } as usize;
    if block == 0 || !row.is_multiple_of(block) || data.len() != rows * row {
        return Err(ImportError::Quantise {
            tensor: name.to_owned(),
            quantisation,
            row,
            block,
        });
    }
    // SAFETY: as above.
    let row_bytes = unsafe { sys::ggml_row_size(ty, row as i64) };
    let mut out = vec![0u8; rows * row_bytes];
    // SAFETY: `data` holds rows × row floats and `out` rows × row_bytes
    // bytes, which is what ggml reads and writes for these arguments; the
    // types used need no importance matrix.
    let written = unsafe {
        sys::ggml_quantize_chunk(
            ty,
            data.as_ptr(),
            out.as_mut_ptr().cast(),
            0,
            rows as i64,
            row as i64,
            std::ptr::null(),
        )
    };
    out.truncate(written);
    Ok(out)
}

/// whisper.cpp's hyper-parameters, in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HParams {
    pub n_vocab: i32,
    pub n_audio_ctx: i32,
    pub n_audio_state: i32,
    pub n_audio_head: i32,
    pub n_audio_layer: i32,
    pub n_text_ctx: i32,
    pub n_text_state: i32,
    pub n_text_head: i32,
    pub n_text_layer: i32,
    pub n_mels: i32,
}

impl HParams {
    pub fn as_array(&self) -> [i32; 10] {
        [
            self.n_vocab,
            self.n_audio_ctx,
            self.n_audio_state,
            self.n_audio_head,
            self.n_audio_layer,
            self.n_text_ctx,
            self.n_text_state,
            self.n_text_head,
            self.n_text_layer,
            self.n_mels,
        ]
    }
}

/// One tensor as whisper.cpp names and stores it.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub name: String,
    /// Shape in PyTorch order (outermost first).
    pub shape: Vec<usize>,
    pub data: TensorData,
}

#[derive(Debug, Clone)]
pub enum TensorData {
    F32(Vec<f32>),
    F16(Vec<half::f16>),
    /// ggml blocks of the given quantisation.
    Quantised(Quantisation, Vec<u8>),
}

impl Tensor {
    /// Re-encodes a 2-D f16 weight in `quantisation`, as whisper.cpp's
    /// quantiser does; other tensors are kept as they are.
    pub fn quantised(self, quantisation: Quantisation) -> Result<Tensor, ImportError> {
        let TensorData::F16(values) = &self.data else {
            return Ok(self);
        };
        if quantisation == Quantisation::F16
            || self.shape.len() != 2
            || NOT_QUANTISED.contains(&self.name.as_str())
        {
            return Ok(self);
        }
        let floats: Vec<f32> = values.iter().map(|v| v.to_f32()).collect();
        let bytes = quantise(
            &self.name,
            self.shape[0],
            self.shape[1],
            &floats,
            quantisation,
        )?;
        Ok(Tensor {
            name: self.name,
            shape: self.shape,
            data: TensorData::Quantised(quantisation, bytes),
        })
    }
}

fn layers(model: &Ct2Model, prefix: &str) -> i32 {
    (0..)
        .take_while(|i| {
            let p = format!("{prefix}/layer_{i}/");
            model.variables.keys().any(|k| k.starts_with(&p))
        })
        .count() as i32
}

fn need<'a>(model: &'a Ct2Model, name: &str) -> Result<&'a Variable, ImportError> {
    model
        .get(name)
        .ok_or_else(|| ImportError::NotWhisper(format!("missing variable `{name}`")))
}

fn floats(model: &Ct2Model, name: &str) -> Result<(Vec<usize>, Vec<f32>), ImportError> {
    let v = need(model, name)?;
    let data = v
        .to_f32()
        .ok_or_else(|| ImportError::NotWhisper(format!("`{name}` is not a float tensor")))?;
    Ok((v.shape.clone(), data))
}

fn scalar(model: &Ct2Model, name: &str) -> Result<i32, ImportError> {
    need(model, name)?
        .scalar_i64()
        .map(|v| v as i32)
        .ok_or_else(|| ImportError::NotWhisper(format!("`{name}` is not an integer")))
}

impl HParams {
    pub fn of(model: &Ct2Model) -> Result<Self, ImportError> {
        if model.spec != "WhisperSpec" {
            return Err(ImportError::NotWhisper(format!(
                "the model is a {}",
                model.spec
            )));
        }
        let emb = &need(model, "decoder/embeddings/weight")?.shape;
        let enc_pos = &need(model, "encoder/position_encodings/encodings")?.shape;
        let dec_pos = &need(model, "decoder/position_encodings/encodings")?.shape;
        let conv1 = &need(model, "encoder/conv1/weight")?.shape;
        let dim = |s: &Vec<usize>, i: usize| s.get(i).copied().unwrap_or(0) as i32;
        Ok(Self {
            n_vocab: dim(emb, 0),
            n_audio_ctx: dim(enc_pos, 0),
            n_audio_state: dim(enc_pos, 1),
            n_audio_head: scalar(model, "encoder/num_heads")?,
            n_audio_layer: layers(model, "encoder"),
            n_text_ctx: dim(dec_pos, 0),
            n_text_state: dim(dec_pos, 1),
            n_text_head: scalar(model, "decoder/num_heads")?,
            n_text_layer: layers(model, "decoder"),
            n_mels: dim(conv1, 1),
        })
    }
}

/// Rows `from..to` of a row-major matrix with `cols` columns.
fn rows(data: &[f32], cols: usize, from: usize, to: usize) -> Vec<f32> {
    data[from * cols..to * cols].to_vec()
}

/// Converts the model's tensors into whisper.cpp's, by name.
pub fn tensors(model: &Ct2Model) -> Result<Vec<Tensor>, ImportError> {
    let hp = HParams::of(model)?;
    let mut out = Vec::new();
    let f16 = |name: String, shape: Vec<usize>, data: Vec<f32>| Tensor {
        name,
        shape,
        data: TensorData::F16(data.into_iter().map(half::f16::from_f32).collect()),
    };
    let f32t = |name: String, shape: Vec<usize>, data: Vec<f32>| Tensor {
        name,
        shape,
        data: TensorData::F32(data),
    };
    // 2-D weights f16, 1-D f32, as whisper.cpp's own converter does.
    let auto = |name: String, shape: Vec<usize>, data: Vec<f32>| {
        if shape.len() >= 2 {
            f16(name, shape, data)
        } else {
            f32t(name, shape, data)
        }
    };
    let copy = |out: &mut Vec<Tensor>, from: &str, to: String| -> Result<(), ImportError> {
        let (shape, data) = floats(model, from)?;
        out.push(auto(to, shape, data));
        Ok(())
    };
    let norm = |out: &mut Vec<Tensor>, from: &str, to: &str| -> Result<(), ImportError> {
        copy(out, &format!("{from}/gamma"), format!("{to}.weight"))?;
        copy(out, &format!("{from}/beta"), format!("{to}.bias"))
    };
    let linear = |out: &mut Vec<Tensor>, from: &str, to: &str| -> Result<(), ImportError> {
        copy(out, &format!("{from}/weight"), format!("{to}.weight"))?;
        copy(out, &format!("{from}/bias"), format!("{to}.bias"))
    };
    // Splits a fused projection into parts of `state` rows; `None` names
    // are skipped for the bias (the key has no bias in whisper.cpp).
    let split = |out: &mut Vec<Tensor>,
                 from: &str,
                 parts: &[(&str, bool)],
                 state: usize|
     -> Result<(), ImportError> {
        let (wshape, w) = floats(model, &format!("{from}/weight"))?;
        let (_, b) = floats(model, &format!("{from}/bias"))?;
        let cols = wshape.get(1).copied().unwrap_or(0);
        if wshape.first().copied() != Some(state * parts.len()) {
            return Err(ImportError::NotWhisper(format!(
                "`{from}/weight` has shape {wshape:?}, expected {} rows",
                state * parts.len()
            )));
        }
        for (i, (name, has_bias)) in parts.iter().enumerate() {
            out.push(f16(
                format!("{name}.weight"),
                vec![state, cols],
                rows(&w, cols, i * state, (i + 1) * state),
            ));
            if *has_bias {
                out.push(f32t(
                    format!("{name}.bias"),
                    vec![state],
                    b[i * state..(i + 1) * state].to_vec(),
                ));
            }
        }
        Ok(())
    };

    // One transformer block: self-attention, cross-attention (decoder
    // only), then the feed-forward network.
    let block = |out: &mut Vec<Tensor>, src: &str, dst: &str, state: usize, cross: bool| {
        norm(
            out,
            &format!("{src}/self_attention/layer_norm"),
            &format!("{dst}.attn_ln"),
        )?;
        let (q, k, v) = (
            format!("{dst}.attn.query"),
            format!("{dst}.attn.key"),
            format!("{dst}.attn.value"),
        );
        split(
            out,
            &format!("{src}/self_attention/linear_0"),
            &[(&q, true), (&k, false), (&v, true)],
            state,
        )?;
        linear(
            out,
            &format!("{src}/self_attention/linear_1"),
            &format!("{dst}.attn.out"),
        )?;
        if cross {
            norm(
                out,
                &format!("{src}/attention/layer_norm"),
                &format!("{dst}.cross_attn_ln"),
            )?;
            linear(
                out,
                &format!("{src}/attention/linear_0"),
                &format!("{dst}.cross_attn.query"),
            )?;
            let (k, v) = (
                format!("{dst}.cross_attn.key"),
                format!("{dst}.cross_attn.value"),
            );
            split(
                out,
                &format!("{src}/attention/linear_1"),
                &[(&k, false), (&v, true)],
                state,
            )?;
            linear(
                out,
                &format!("{src}/attention/linear_2"),
                &format!("{dst}.cross_attn.out"),
            )?;
        }
        norm(
            out,
            &format!("{src}/ffn/layer_norm"),
            &format!("{dst}.mlp_ln"),
        )?;
        linear(out, &format!("{src}/ffn/linear_0"), &format!("{dst}.mlp.0"))?;
        linear(out, &format!("{src}/ffn/linear_1"), &format!("{dst}.mlp.2"))
    };

    // Encoder.
    let (shape, data) = floats(model, "encoder/conv1/weight")?;
    out.push(f16("encoder.conv1.weight".into(), shape, data));
    let (shape, data) = floats(model, "encoder/conv1/bias")?;
    out.push(f32t("encoder.conv1.bias".into(), vec![shape[0], 1], data));
    let (shape, data) = floats(model, "encoder/conv2/weight")?;
    out.push(f16("encoder.conv2.weight".into(), shape, data));
    let (shape, data) = floats(model, "encoder/conv2/bias")?;
    out.push(f32t("encoder.conv2.bias".into(), vec![shape[0], 1], data));
    let (shape, data) = floats(model, "encoder/position_encodings/encodings")?;
    out.push(f32t("encoder.positional_embedding".into(), shape, data));
    for l in 0..hp.n_audio_layer {
        let (src, dst) = (format!("encoder/layer_{l}"), format!("encoder.blocks.{l}"));
        block(&mut out, &src, &dst, hp.n_audio_state as usize, false)?;
    }
    norm(&mut out, "encoder/layer_norm", "encoder.ln_post")?;

    // Decoder.
    let (shape, data) = floats(model, "decoder/embeddings/weight")?;
    out.push(f16("decoder.token_embedding.weight".into(), shape, data));
    let (shape, data) = floats(model, "decoder/position_encodings/encodings")?;
    out.push(f32t("decoder.positional_embedding".into(), shape, data));
    for l in 0..hp.n_text_layer {
        let (src, dst) = (format!("decoder/layer_{l}"), format!("decoder.blocks.{l}"));
        block(&mut out, &src, &dst, hp.n_text_state as usize, true)?;
    }
    norm(&mut out, "decoder/layer_norm", "decoder.ln")?;
    Ok(out)
}

/// Writes a whisper.cpp ggml model file with weights in `quantisation`.
pub fn write_ggml(
    model: &Ct2Model,
    path: &Path,
    quantisation: Quantisation,
) -> Result<HParams, ImportError> {
    let hp = HParams::of(model)?;
    let tensors = tensors(model)?
        .into_iter()
        .map(|t| t.quantised(quantisation))
        .collect::<Result<Vec<_>, _>>()?;
    let err = |source| ImportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::create(path).map_err(err)?;
    let mut w = BufWriter::new(file);
    let mut put = |bytes: &[u8]| w.write_all(bytes);
    put(&GGML_MAGIC.to_le_bytes()).map_err(err)?;
    for v in hp.as_array() {
        put(&v.to_le_bytes()).map_err(err)?;
    }
    put(&quantisation.header_ftype().to_le_bytes()).map_err(err)?;
    let n_fft = 201i32;
    put(&hp.n_mels.to_le_bytes()).map_err(err)?;
    put(&n_fft.to_le_bytes()).map_err(err)?;
    for v in mel::filters(16_000, 400, hp.n_mels as usize) {
        put(&v.to_le_bytes()).map_err(err)?;
    }
    let entries = model.vocabulary.len().min(BASE_VOCAB);
    put(&(entries as i32).to_le_bytes()).map_err(err)?;
    for token in &model.vocabulary[..entries] {
        let bytes = vocab::token_bytes(token).unwrap_or_else(|| token.as_bytes().to_vec());
        put(&(bytes.len() as u32).to_le_bytes()).map_err(err)?;
        put(&bytes).map_err(err)?;
    }
    for t in &tensors {
        let ttype: i32 = match t.data {
            TensorData::F32(_) => 0,
            TensorData::F16(_) => 1,
            TensorData::Quantised(q, _) => q.ggml_type() as i32,
        };
        put(&(t.shape.len() as i32).to_le_bytes()).map_err(err)?;
        put(&(t.name.len() as i32).to_le_bytes()).map_err(err)?;
        put(&ttype.to_le_bytes()).map_err(err)?;
        // ggml lists dimensions innermost first.
        for d in t.shape.iter().rev() {
            put(&(*d as i32).to_le_bytes()).map_err(err)?;
        }
        put(t.name.as_bytes()).map_err(err)?;
        match &t.data {
            TensorData::F32(v) => {
                for x in v {
                    put(&x.to_le_bytes()).map_err(err)?;
                }
            }
            TensorData::F16(v) => {
                for x in v {
                    put(&x.to_le_bytes()).map_err(err)?;
                }
            }
            TensorData::Quantised(_, bytes) => put(bytes).map_err(err)?,
        }
    }
    w.flush().map_err(err)?;
    Ok(hp)
}
