//! `--transform FIELD=OP[,OP…]` of `ffcv bench` and `ffcv doctor`, and how it joins the
//! `--decoder FIELD=SPEC` flags into the loader's pipelines.
//!
//! The op grammar is the facade's ([`ffcv::transform_spec`]); a bad op string is a clap
//! value error, so the command exits 2 with the grammar in the message.

use std::sync::Arc;

use beton_io::Reader;
use ffcv::jit::Operation;
use ffcv::{DecoderChoice, LoaderBuilder};

/// One `--transform FIELD=OP[,OP…]`: the field, the text as given and its ops in order.
#[derive(Clone)]
pub struct TransformArg {
    /// The field.
    pub field: String,
    /// The flag's value as given (`image=flip,chw`), for recommended commands.
    pub text: String,
    /// The parsed ops.
    pub ops: Vec<Arc<dyn Operation>>,
}

impl std::fmt::Debug for TransformArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl TransformArg {
    /// The ops' names joined by arrows (`RandomHorizontalFlip(0.5) -> ToChw`), for reports.
    pub fn describe(&self) -> String {
        self.ops
            .iter()
            .map(|op| op.name())
            .collect::<Vec<_>>()
            .join(" -> ")
    }
}

/// Parses `--transform`'s value (the clap value parser: an error exits 2).
pub fn parse_transform(text: &str) -> Result<TransformArg, String> {
    let (field, ops) =
        ffcv::transform_spec::parse_field_transforms(text).map_err(|e| e.to_string())?;
    Ok(TransformArg {
        field,
        text: text.to_owned(),
        ops,
    })
}

/// Gives `builder` the fields' decoders and transforms. A field with transforms gets one
/// pipeline: its decoder (the last `--decoder` for it, else the field type's default) and
/// the ops of every `--transform` for it, in the order given. Other fields get their
/// decoder. The error names the field (unknown field, disabled field with transforms).
pub fn apply(
    mut builder: LoaderBuilder,
    reader: &Reader,
    decoders: &[(String, DecoderChoice)],
    transforms: &[TransformArg],
) -> Result<LoaderBuilder, String> {
    let last_decoder = |field: &str| {
        decoders
            .iter()
            .rev()
            .find(|(f, _)| f == field)
            .map(|(_, c)| c)
    };
    let mut done: Vec<&str> = Vec::new();
    for t in transforms {
        if done.contains(&t.field.as_str()) {
            continue;
        }
        done.push(&t.field);
        let ops: Vec<Arc<dyn Operation>> = transforms
            .iter()
            .filter(|other| other.field == t.field)
            .flat_map(|other| other.ops.iter().cloned())
            .collect();
        let spec =
            ffcv::transform_spec::field_pipeline(reader, &t.field, last_decoder(&t.field), &ops)
                .map_err(|e| format!("--transform {}: {e}", t.text))?;
        builder = builder.pipeline(t.field.clone(), spec);
    }
    for (field, choice) in decoders {
        if !done.contains(&field.as_str()) {
            builder = builder.decoder(field.clone(), choice.clone());
        }
    }
    Ok(builder)
}
