//! Hark's speech-to-text.
//!
//! - [`recognizer`]: what a recogniser is (requests, transcripts, the
//!   [`recognizer::Recognizer`] trait): plain data the rest stands on.
//! - [`whisper`]: whisper.cpp as a recogniser.
//! - [`choice`]: models chosen per request, by name or size.
//! - [`ct2`]: reading CTranslate2 model folders.
//! - [`import`]: converting a CTranslate2 whisper model to whisper.cpp's
//!   ggml format.
//! - [`engine`]: the transcription engine — one recogniser (whisper's
//!   models, or the live engine) on a worker thread behind a bounded queue.
//! - [`mel`], [`vocab`]: the mel filterbank and the byte-level vocabulary
//!   the ggml format carries.
//! - [`fallback`]: when a pass is not trusted and what is tried then.
//! - [`moonshine`]: the live engine; [`turn`]: the end-of-turn model and
//!   what the words up to a pause say; [`level`]: where a clip has sound.

pub mod choice;
pub mod ct2;
pub mod engine;
pub mod fallback;
pub mod import;
pub mod level;
pub mod mel;
pub mod moonshine;
pub mod recognizer;
pub mod turn;
pub mod vocab;
pub mod whisper;
