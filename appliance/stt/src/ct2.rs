//! Reading a CTranslate2 model directory (`model.bin`, `vocabulary.txt`).
//!
//! `model.bin` layout (version 6): u32 version; the spec name and revision;
//! u32 variable count; each variable as name, u8 rank, u32 dims, u8 dtype
//! (0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16), u32 byte count and the data;
//! then u32 alias count and (alias, target) name pairs. Strings are a u16
//! length (counting a trailing NUL) and the bytes.

use std::{
    collections::BTreeMap,
    io::Read,
    path::{Path, PathBuf},
};

#[derive(Debug, thiserror::Error)]
pub enum Ct2Error {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a CTranslate2 model: {reason}")]
    Format { path: PathBuf, reason: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    I8,
    I16,
    I32,
    F16,
    BF16,
}

impl DType {
    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => DType::F32,
            1 => DType::I8,
            2 => DType::I16,
            3 => DType::I32,
            4 => DType::F16,
            5 => DType::BF16,
            _ => return None,
        })
    }

    pub fn size(self) -> usize {
        match self {
            DType::I8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Variable {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub data: Vec<u8>,
}

impl Variable {
    /// The values as f32 (float types only).
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        let chunks = self.data.chunks_exact(self.dtype.size());
        Some(match self.dtype {
            DType::F32 => chunks
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            DType::F16 => chunks
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            DType::BF16 => chunks
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            _ => return None,
        })
    }

    /// A scalar integer variable's value.
    pub fn scalar_i64(&self) -> Option<i64> {
        match (self.dtype, self.data.as_slice()) {
            (DType::I8, [b]) => Some(i64::from(*b as i8)),
            (DType::I16, [a, b]) => Some(i64::from(i16::from_le_bytes([*a, *b]))),
            (DType::I32, [a, b, c, d]) => Some(i64::from(i32::from_le_bytes([*a, *b, *c, *d]))),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Ct2Model {
    pub spec: String,
    pub revision: u32,
    pub variables: BTreeMap<String, Variable>,
    pub aliases: BTreeMap<String, String>,
    /// Token strings from `vocabulary.txt` (GPT-2 byte-level encoding).
    pub vocabulary: Vec<String>,
}

struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let slice = self.data.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn string(&mut self) -> Option<String> {
        let len = usize::from(self.u16()?);
        let bytes = self.take(len)?;
        let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        String::from_utf8(bytes.to_vec()).ok()
    }
}

impl Ct2Model {
    /// Reads `dir/model.bin` and `dir/vocabulary.txt`.
    pub fn read(dir: &Path) -> Result<Self, Ct2Error> {
        let model_path = dir.join("model.bin");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Ct2Error::Io { path, source }
        };
        let mut data = Vec::new();
        std::fs::File::open(&model_path)
            .and_then(|mut f| f.read_to_end(&mut data))
            .map_err(io(&model_path))?;
        let format = |reason: &str| Ct2Error::Format {
            path: model_path.clone(),
            reason: reason.to_owned(),
        };
        let mut c = Cursor { data: &data, at: 0 };
        let version = c.u32().ok_or_else(|| format("empty file"))?;
        if !(5..=6).contains(&version) {
            return Err(format(&format!(
                "unsupported version {version} (5 or 6 expected)"
            )));
        }
        let spec = c.string().ok_or_else(|| format("no spec name"))?;
        let revision = c.u32().ok_or_else(|| format("no spec revision"))?;
        let count = c.u32().ok_or_else(|| format("no variable count"))?;
        let mut variables = BTreeMap::new();
        for i in 0..count {
            let truncated = || format(&format!("variable {i} is truncated"));
            let name = c.string().ok_or_else(truncated)?;
            let rank = c.u8().ok_or_else(truncated)?;
            let shape = (0..rank)
                .map(|_| c.u32().map(|d| d as usize))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(truncated)?;
            let dtype = c
                .u8()
                .and_then(DType::from_code)
                .ok_or_else(|| format(&format!("variable `{name}` has an unknown type")))?;
            let bytes = c.u32().ok_or_else(truncated)? as usize;
            let expected = shape.iter().product::<usize>().max(1) * dtype.size();
            if bytes != expected {
                return Err(format(&format!(
                    "variable `{name}` holds {bytes} bytes; its shape {shape:?} needs {expected}"
                )));
            }
            let payload = c.take(bytes).ok_or_else(truncated)?.to_vec();
            variables.insert(
                name,
                Variable {
                    shape,
                    dtype,
                    data: payload,
                },
            );
        }
        let mut aliases = BTreeMap::new();
        if let Some(n) = c.u32() {
            for _ in 0..n {
                let alias = c.string().ok_or_else(|| format("truncated alias"))?;
                let target = c.string().ok_or_else(|| format("truncated alias"))?;
                aliases.insert(alias, target);
            }
        }
        // `vocabulary.txt` (one token a line), or, from newer converters,
        // `vocabulary.json` (a JSON array of the same strings).
        let txt = dir.join("vocabulary.txt");
        let json = dir.join("vocabulary.json");
        let vocabulary = if !txt.exists() && json.exists() {
            let text = std::fs::read_to_string(&json).map_err(io(&json))?;
            serde_json::from_str::<Vec<String>>(&text).map_err(|e| {
                format(&format!(
                    "{} is not a JSON list of tokens: {e}",
                    json.display()
                ))
            })?
        } else {
            std::fs::read_to_string(&txt)
                .map_err(io(&txt))?
                .lines()
                .map(str::to_owned)
                .collect()
        };
        Ok(Self {
            spec,
            revision,
            variables,
            aliases,
            vocabulary,
        })
    }

    /// A variable by name, following aliases.
    pub fn get(&self, name: &str) -> Option<&Variable> {
        self.variables
            .get(name)
            .or_else(|| self.variables.get(self.aliases.get(name)?))
    }
}
