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

/// One `--decoder FIELD=SPEC` (or `NAME=SOURCE:SPEC`, a view): the field, the text as
/// given and the decoder.
#[derive(Debug, Clone)]
pub struct DecoderArg {
    /// The field (a view's name for a view).
    pub field: String,
    /// For a view (`image_0=image:random-resized-crop:224x224`, FFCV-SSL's
    /// `custom_field_mapper`): the field (or earlier view) it decodes again.
    pub source: Option<String>,
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
    let (field, choice, source) = match ffcv::decode::parse_field_decoder(text) {
        Ok((field, choice)) => (field, choice, None),
        Err(e) => {
            // Not a decoder: `NAME=SOURCE:SPEC`, a view of SOURCE (`SOURCE:default` for
            // the source type's default decoder).
            let view = text.split_once('=').and_then(|(name, spec)| {
                let (source, rest) = spec.split_once(':')?;
                let choice: DecoderChoice = rest.parse().ok()?;
                let ok = !name.is_empty() && !source.is_empty();
                ok.then(|| (name.to_owned(), choice, Some(source.to_owned())))
            });
            view.ok_or_else(|| e.to_string())?
        }
    };
    Ok(DecoderArg {
        field,
        source,
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
         the output (faster, not FFCV's pixels). NAME=SOURCE:SPEC adds a view, output NAME \
         decoding field SOURCE again with its own random draws (FFCV-SSL's \
         custom_field_mapper), e.g. `image_0=image:random-resized-crop:224x224`",
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
/// decoder. Views (`--decoder NAME=SOURCE:SPEC`) come after, in the order given, each with
/// the transforms of its NAME. The error names the field (unknown field, disabled field
/// with transforms).
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
    let is_view = |field: &str| {
        decoders
            .iter()
            .any(|d| d.field == field && d.source.is_some())
    };
    let mut done: Vec<&str> = Vec::new();
    for t in transforms {
        if done.contains(&t.field.as_str()) || is_view(&t.field) {
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
        if !done.contains(&d.field.as_str()) && d.source.is_none() {
            builder = builder.decoder(d.field.clone(), d.choice.clone());
        }
    }
    for (i, d) in decoders.iter().enumerate() {
        let Some(source) = &d.source else { continue };
        // The last `--decoder` of a view's name is the one that counts.
        if decoders[i + 1..].iter().any(|later| later.field == d.field) {
            continue;
        }
        let ops: Vec<Arc<dyn Operation>> = transforms
            .iter()
            .filter(|t| t.field == d.field)
            .flat_map(|t| t.ops.iter().cloned())
            .collect();
        builder = if ops.is_empty() {
            builder.view(d.field.clone(), source.clone(), d.choice.clone())
        } else {
            // The default decoder is the file field's, found through views of views.
            let mut field = source.as_str();
            for _ in 0..decoders.len() {
                match decoders.iter().rev().find(|o| o.field == field) {
                    Some(DecoderArg {
                        source: Some(s), ..
                    }) => field = s,
                    _ => break,
                }
            }
            let spec = ffcv::transform_spec::field_pipeline(reader, field, Some(&d.choice), &ops)
                .map_err(|e| format!("--decoder {}: {e}", d.text))?;
            builder.view(d.field.clone(), source.clone(), spec)
        };
    }
    Ok(builder)
}
