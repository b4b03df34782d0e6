//! TensorFlow Lite's C library, opened at run time: the runtime the
//! microWakeWord models are built for. They are streaming models that keep
//! their state in resource variables between calls, which ONNX has no
//! counterpart for, so they are run as they ship, on the `libtensorflowlite_c`
//! the same package (`pymicro-wakeword`) carries. Only the few calls a
//! one-input, one-output quantised model needs are bound.

use std::ffi::{CString, c_char, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum TfLiteError {
    #[error("cannot open the TensorFlow Lite library {}: {source}", path.display())]
    Library {
        path: PathBuf,
        #[source]
        source: libloading::Error,
    },
    #[error("{} has no {symbol}: not a TensorFlow Lite C library", path.display())]
    Symbol { path: PathBuf, symbol: &'static str },
    #[error("{} is not a TensorFlow Lite model", path.display())]
    Model { path: PathBuf },
    #[error("{}: {what}", path.display())]
    Interface { path: PathBuf, what: String },
    #[error("TensorFlow Lite failed to {0}")]
    Call(&'static str),
}

/// TfLiteType values the models use.
pub const INT8: i32 = 9;
pub const UINT8: i32 = 3;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Quantization {
    pub scale: f32,
    pub zero_point: i32,
}

type Opaque = c_void;

/// The bound calls.
struct Api {
    model_create: unsafe extern "C" fn(*const c_char) -> *mut Opaque,
    model_delete: unsafe extern "C" fn(*mut Opaque),
    options_create: unsafe extern "C" fn() -> *mut Opaque,
    options_threads: unsafe extern "C" fn(*mut Opaque, i32),
    options_delete: unsafe extern "C" fn(*mut Opaque),
    interpreter_create: unsafe extern "C" fn(*const Opaque, *const Opaque) -> *mut Opaque,
    interpreter_delete: unsafe extern "C" fn(*mut Opaque),
    allocate: unsafe extern "C" fn(*mut Opaque) -> i32,
    inputs: unsafe extern "C" fn(*const Opaque) -> i32,
    outputs: unsafe extern "C" fn(*const Opaque) -> i32,
    input: unsafe extern "C" fn(*const Opaque, i32) -> *mut Opaque,
    output: unsafe extern "C" fn(*const Opaque, i32) -> *const Opaque,
    invoke: unsafe extern "C" fn(*mut Opaque) -> i32,
    tensor_type: unsafe extern "C" fn(*const Opaque) -> i32,
    dims: unsafe extern "C" fn(*const Opaque) -> i32,
    dim: unsafe extern "C" fn(*const Opaque, i32) -> i32,
    bytes: unsafe extern "C" fn(*const Opaque) -> usize,
    quantization: unsafe extern "C" fn(*const Opaque) -> Quantization,
    copy_in: unsafe extern "C" fn(*mut Opaque, *const c_void, usize) -> i32,
    copy_out: unsafe extern "C" fn(*const Opaque, *mut c_void, usize) -> i32,
    // Keeps the functions above valid.
    _library: libloading::Library,
}

/// The library, opened once and shared by every model.
#[derive(Clone)]
pub struct TfLite(Arc<Api>);

impl TfLite {
    pub fn open(path: &Path) -> Result<Self, TfLiteError> {
        // SAFETY: opening runs the library's initialisers; it is the
        // TensorFlow Lite C library the set-up installs, whose functions
        // are looked up by their C API names and signatures below.
        let library =
            unsafe { libloading::Library::new(path) }.map_err(|source| TfLiteError::Library {
                path: path.to_owned(),
                source,
            })?;
        macro_rules! bind {
            ($name:literal) => {
                // SAFETY: the type is the C API's declaration of $name.
                *unsafe { library.get(concat!($name, "\0").as_bytes()) }.map_err(|_| {
                    TfLiteError::Symbol {
                        path: path.to_owned(),
                        symbol: $name,
                    }
                })?
            };
        }
        let api = Api {
            model_create: bind!("TfLiteModelCreateFromFile"),
            model_delete: bind!("TfLiteModelDelete"),
            options_create: bind!("TfLiteInterpreterOptionsCreate"),
            options_threads: bind!("TfLiteInterpreterOptionsSetNumThreads"),
            options_delete: bind!("TfLiteInterpreterOptionsDelete"),
            interpreter_create: bind!("TfLiteInterpreterCreate"),
            interpreter_delete: bind!("TfLiteInterpreterDelete"),
            allocate: bind!("TfLiteInterpreterAllocateTensors"),
            inputs: bind!("TfLiteInterpreterGetInputTensorCount"),
            outputs: bind!("TfLiteInterpreterGetOutputTensorCount"),
            input: bind!("TfLiteInterpreterGetInputTensor"),
            output: bind!("TfLiteInterpreterGetOutputTensor"),
            invoke: bind!("TfLiteInterpreterInvoke"),
            tensor_type: bind!("TfLiteTensorType"),
            dims: bind!("TfLiteTensorNumDims"),
            dim: bind!("TfLiteTensorDim"),
            bytes: bind!("TfLiteTensorByteSize"),
            quantization: bind!("TfLiteTensorQuantizationParams"),
            copy_in: bind!("TfLiteTensorCopyFromBuffer"),
            copy_out: bind!("TfLiteTensorCopyToBuffer"),
            _library: library,
        };
        Ok(Self(Arc::new(api)))
    }

    /// Loads a model with one input and one output tensor.
    pub fn model(&self, path: &Path) -> Result<Model, TfLiteError> {
        let api = &self.0;
        let name =
            CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| TfLiteError::Model {
                path: path.to_owned(),
            })?;
        // SAFETY: a NUL-terminated path; null on failure.
        let model = unsafe { (api.model_create)(name.as_ptr()) };
        if model.is_null() {
            return Err(TfLiteError::Model {
                path: path.to_owned(),
            });
        }
        let model = Model {
            lite: self.clone(),
            model,
            interpreter: std::ptr::null_mut(),
            path: path.to_owned(),
        };
        let mut model = model;
        model.start()?;
        Ok(model)
    }
}

/// A loaded model and its interpreter (which holds the streaming state).
pub struct Model {
    lite: TfLite,
    model: *mut Opaque,
    interpreter: *mut Opaque,
    path: PathBuf,
}

// SAFETY: the model and interpreter are used by one thread at a time
// (`&mut self` for every call that touches them); TensorFlow Lite allows
// an interpreter to move between threads.
unsafe impl Send for Model {}

impl Model {
    /// A fresh interpreter: the streaming state back to its start.
    pub fn start(&mut self) -> Result<(), TfLiteError> {
        self.stop();
        let api = Arc::clone(&self.lite.0);
        // SAFETY: the model outlives the interpreter (deleted first in
        // `stop`); options are only read during creation.
        unsafe {
            let options = (api.options_create)();
            if !options.is_null() {
                (api.options_threads)(options, 1);
            }
            self.interpreter = (api.interpreter_create)(self.model, options);
            if !options.is_null() {
                (api.options_delete)(options);
            }
        }
        if self.interpreter.is_null() {
            return Err(self.interface("no interpreter could be made for it"));
        }
        // SAFETY: a live interpreter.
        if unsafe { (api.allocate)(self.interpreter) } != 0 {
            return Err(TfLiteError::Call("allocate the model's tensors"));
        }
        // SAFETY: a live interpreter.
        let (inputs, outputs) = unsafe {
            (
                (api.inputs)(self.interpreter),
                (api.outputs)(self.interpreter),
            )
        };
        if inputs != 1 || outputs != 1 {
            return Err(self.interface(&format!(
                "{inputs} inputs and {outputs} outputs, where a wake word model has one of each"
            )));
        }
        Ok(())
    }

    fn stop(&mut self) {
        if !self.interpreter.is_null() {
            // SAFETY: made by TfLiteInterpreterCreate, deleted once.
            unsafe { (self.lite.0.interpreter_delete)(self.interpreter) };
            self.interpreter = std::ptr::null_mut();
        }
    }

    fn interface(&self, what: &str) -> TfLiteError {
        TfLiteError::Interface {
            path: self.path.clone(),
            what: what.to_owned(),
        }
    }

    fn tensor(&self, input: bool) -> *const Opaque {
        let api = &self.lite.0;
        // SAFETY: a live interpreter with one input and one output.
        unsafe {
            if input {
                (api.input)(self.interpreter, 0)
            } else {
                (api.output)(self.interpreter, 0)
            }
        }
    }

    /// The tensor's element type, shape and quantisation.
    pub fn describe(&self, input: bool) -> (i32, Vec<i32>, Quantization, usize) {
        let api = &self.lite.0;
        let t = self.tensor(input);
        // SAFETY: a tensor of the live interpreter.
        unsafe {
            let dims = (0..(api.dims)(t)).map(|i| (api.dim)(t, i)).collect();
            (
                (api.tensor_type)(t),
                dims,
                (api.quantization)(t),
                (api.bytes)(t),
            )
        }
    }

    /// Runs the model on `input` (exactly the input tensor's bytes) and
    /// writes the output tensor into `output` (exactly its bytes).
    pub fn run(&mut self, input: &[u8], output: &mut [u8]) -> Result<(), TfLiteError> {
        let api = &self.lite.0;
        let (tin, tout) = (self.tensor(true) as *mut Opaque, self.tensor(false));
        // SAFETY: sizes are checked by the library against the tensors'.
        unsafe {
            if (api.copy_in)(tin, input.as_ptr().cast(), input.len()) != 0 {
                return Err(TfLiteError::Call("take the input"));
            }
            if (api.invoke)(self.interpreter) != 0 {
                return Err(TfLiteError::Call("run the model"));
            }
            if (api.copy_out)(tout, output.as_mut_ptr().cast(), output.len()) != 0 {
                return Err(TfLiteError::Call("give the output"));
            }
        }
        Ok(())
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        self.stop();
        // SAFETY: made by TfLiteModelCreateFromFile, deleted once, after
        // its interpreter.
        unsafe { (self.lite.0.model_delete)(self.model) };
    }
}
