//! `--decoder FIELD=SPEC` and `--transform FIELD=OP[,OP…]` of `ffcv bench` and `ffcv
//! doctor`, their help texts, and how they join into the loader's pipelines.
//!
//! Both grammars are the facade's ([`ffcv::DecoderChoice::GRAMMAR`],
//! [`ffcv::transform_spec::TRANSFORM_GRAMMAR`]), quoted in the help from those constants so
//! that no list of names is copied by hand; a bad value is a clap value error, so the
//! command exits 2 with the grammar in the message.

use std::sync::Arc;

use beton_io::Reader;
use ffcv::jit::Operation;
use ffcv::transform_spec::FieldTransforms;
use ffcv::{DecoderChoice, LoaderBuilder};

/// One `--decoder FIELD=SPEC`: the field, the text as given and the decoder.
#[derive(Debug, Clone)]
pub struct DecoderArg {
    /// The field.
    pub field: String,
    /// The flag's value as given (`image=center-crop:224x224`), for reports and
    /// recommended commands.
    pub text: String,
    /// The decoder.
    pub choice: DecoderChoice,
}

impl DecoderArg {
    /// The SPEC part of the value as given (`center-crop:224x224`).
    pub fn spec(&self) -> &str {
        self.text.split_once('=').map_or("", |(_, spec)| spec)
    }
}

/// Parses `--decoder`'s value through the parser `ffcv dump --decoder` shares (the clap
/// value parser: an error exits 2).
pub fn parse_decoder(text: &str) -> Result<DecoderArg, String> {
    let (field, choice) = ffcv::decode::parse_field_decoder(text).map_err(|e| e.to_string())?;
    Ok(DecoderArg {
        field,
        text: text.to_owned(),
        choice,
    })
}

/// The help of `--decoder FIELD=SPEC`, with the facade's list of SPECs.
pub fn decoder_help() -> String {
    format!(
        "A field's decoder, repeatable: FIELD=SPEC with SPEC one of {}. A crop decoder's \
         `:dct-scale` (e.g. `image=center-crop:112x112:dct-scale`) is opt-in DCT-domain \
         downscaling, decoding the JPEG at 1/2, 1/4 or 1/8 where the crop is at least twice \
         the output (faster, not FFCV's pixels)",
        DecoderChoice::GRAMMAR
    )
}

/// The help of `--transform FIELD=OP[,OP…]`, with the facade's list of ops.
pub fn transform_help() -> String {
    format!(
        "A field's transforms after its decoder, repeatable: FIELD=OP[,OP…] with OP one of \
         {}; e.g. FFCV's ImageNet training chain `--decoder image=random-resized-crop:224x224 \
         --transform image=flip,normalize:imagenet:f32,chw`",
        ffcv::transform_spec::TRANSFORM_GRAMMAR
    )
}

/// Gives `builder` the fields' decoders and transforms. A field with transforms gets one
/// pipeline: its decoder (the last `--decoder` for it, else the field type's default) and
/// the ops of every `--transform` for it, in the order given. Other fields get their
/// decoder. The error names the field (unknown field, disabled field with transforms).
pub fn apply(
    mut builder: LoaderBuilder,
    reader: &Reader,
    decoders: &[DecoderArg],
    transforms: &[FieldTransforms],
) -> Result<LoaderBuilder, String> {
    let last_decoder = |field: &str| {
        decoders
            .iter()
            .rev()
            .find(|d| d.field == field)
            .map(|d| &d.choice)
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
                .map_err(|e| format!("--transform {}: {e}", t.text()))?;
        builder = builder.pipeline(t.field.clone(), spec);
    }
    for d in decoders {
        if !done.contains(&d.field.as_str()) {
            builder = builder.decoder(d.field.clone(), d.choice.clone());
        }
    }
    Ok(builder)
}
