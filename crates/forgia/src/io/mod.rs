//! Reading and writing tensors as `.safetensors` files: named tensors ([`save`], [`load`]), a
//! module's parameters ([`save_model`], [`load_into`]) and training checkpoints with optimizer
//! state ([`save_checkpoint`], [`load_checkpoint`]).
//!
//! Files are plain safetensors (F32, little-endian) that other tools read; files written
//! elsewhere load with F16, BF16 and F64 entries converted to f32 and integer entries as
//! [`Indices`](crate::Indices) ([`load_entries`]). Hugging Face checkpoints, with
//! `transformers`' names and `config.json`, load through [`load_hf`] and [`HfConfig`].
//! forgia adds a
//! checksum over names, shapes and data in the header metadata (`forgia.checksum`) and checks
//! it on load when present, so a corrupted file is an error rather than silently wrong weights.
//! Writes go to a temporary file in the same directory that is renamed over the target, so a
//! crash never leaves a partial checkpoint. Loads into a module validate every name and shape
//! before assigning anything: a failed load leaves the module unchanged.
//!
//! ```
//! use forgia::nn::{Linear, Module};
//! use forgia::{io, Rng};
//! let dir = std::env::temp_dir().join(format!("forgia-doc-io-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("model.safetensors");
//! let a = Linear::new(3, 2, true, &mut Rng::new(1))?;
//! io::save_model(&path, &a)?;
//! let mut b = Linear::new(3, 2, true, &mut Rng::new(2))?;
//! io::load_into(&mut b, &path)?;
//! assert_eq!(a.weight.to_vec(), b.weight.to_vec());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), forgia::Error>(())
//! ```

mod checkpoint;
mod dtype;
mod file;
mod hf;

pub use checkpoint::{load_checkpoint, load_into, save_checkpoint, save_model};
pub use dtype::Entry;
pub use file::{load, load_entries, save};
pub use hf::{load_hf, save_hf, HfConfig, HfLoadReport, HfNames};
