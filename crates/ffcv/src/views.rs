//! Several views of one field (FFCV-SSL's `custom_field_mapper`): extra outputs that
//! decode an existing field of the file under another name, each with its own pipeline
//! and its own random draws.
//!
//! [`crate::LoaderBuilder::view`] (`image_0` from `image`, with a pipeline or a decoder
//! choice) adds views; a view of a view is a view of its source. As in FFCV-SSL the batch
//! holds the file's enabled fields in file order, then the views in the order they were
//! added; the source field itself may be disabled. A view's name must not be a field of
//! the file (a second view of one name replaces the first) and its source must exist:
//! either is a [`crate::Error::Config`] when the loader is built.
//!
//! Random draws: the field under its own name is view 0 of the field, and the k-th view
//! added for a field is view k. View k's pipeline draws from the loader seed mixed with k
//! ([`crate::view_seed`], in `decode/views.rs`; view 0 keeps the loader seed), so every
//! operation of it draws from `(seed, epoch, sample, view, operation)`: two views of a
//! sample differ, a one-view loader is unchanged, and removing the source field from the
//! batch does not change the other views.
//!
//! Views of an RGB image field whose decoders are all built-in crop decoders (without
//! DCT-domain downscaling) form a group: the batch fill decodes their JPEG once per sample
//! for all of them where that is cheaper (`decode/views.rs`, rgb-image's `ViewsKernel`),
//! with the same bytes as decoding each alone. The group's decoded rows take
//! `batch_size x H x W x 3` bytes per view, allocated once per epoch.

use std::sync::Arc;

use beton_io::{FieldType, Reader};

use crate::decode::views::{ViewGroup, ViewOf};
use crate::decode::{DecoderChoice, PipelineSpec, default_decoder};
use crate::error::{Error, Result};
use crate::image::ViewsPolicy;
use crate::run_state::FieldRunner;

/// What a view decodes with ([`crate::LoaderBuilder::view`]): a pipeline, or a decoder
/// choice ([`DecoderChoice::Default`]: the source type's default decoder; `Disabled`
/// leaves the view out).
#[derive(Clone, Debug)]
pub enum ViewPipeline {
    /// A decoder and transforms.
    Spec(PipelineSpec),
    /// A decoder choice.
    Choice(DecoderChoice),
}

impl From<PipelineSpec> for ViewPipeline {
    fn from(spec: PipelineSpec) -> Self {
        ViewPipeline::Spec(spec)
    }
}

impl From<DecoderChoice> for ViewPipeline {
    fn from(choice: DecoderChoice) -> Self {
        ViewPipeline::Choice(choice)
    }
}

/// One view added to a builder.
#[derive(Clone, Debug)]
struct ViewSpec {
    name: String,
    source: String,
    pipeline: ViewPipeline,
}

/// The views a builder holds, in the order they were added, and how groups decode.
#[derive(Clone, Debug, Default)]
pub(crate) struct Views {
    list: Vec<ViewSpec>,
    policy: ViewsPolicy,
}

impl Views {
    /// Adds view `name` of `source` (a second view of one name replaces the first, as a
    /// second pipeline of a field does).
    pub(crate) fn push(&mut self, name: String, source: String, pipeline: ViewPipeline) {
        self.list.retain(|v| v.name != name);
        self.list.push(ViewSpec {
            name,
            source,
            pipeline,
        });
    }

    /// Sets how groups decode (`LoaderBuilder::views_policy`).
    pub(crate) fn set_policy(&mut self, policy: ViewsPolicy) {
        self.policy = policy;
    }
}

/// Step 7's views: a runner for every enabled view, after the file's fields in `runners`,
/// and the image groups that decode once. `compile` and `max_image_pixels` are the
/// builder's.
pub(crate) fn add_runners(
    mut runners: Vec<FieldRunner>,
    reader: &Reader,
    views: &Views,
    (compile, max_image_pixels): (bool, u64),
    pool: &Arc<rayon::ThreadPool>,
) -> Result<Vec<FieldRunner>> {
    let bad = |reason: String| Error::Config {
        path: reader.path().to_owned(),
        reason,
        cause: None,
    };
    // How many views each field has so far (view 0 is the field itself).
    let mut counts = vec![0usize; reader.fields().len()];
    let mut resolved: Vec<(&str, usize)> = Vec::new();
    for v in &views.list {
        if reader.field_index(&v.name).is_some() {
            return Err(bad(format!(
                "view {:?} has the name of a field of the file; give the view a new name",
                v.name
            )));
        }
        let field = match reader.field_index(&v.source) {
            Some(i) => i,
            None => match resolved.iter().find(|(n, _)| *n == v.source) {
                Some(&(_, i)) => i,
                None => {
                    let names: Vec<&str> =
                        reader.fields().iter().map(|f| f.name.as_str()).collect();
                    return Err(bad(format!(
                        "view {:?} maps to {:?}, which is neither a field of the file \
                         (fields: {}) nor a view added before it",
                        v.name,
                        v.source,
                        names.join(", ")
                    )));
                }
            },
        };
        resolved.push((&v.name, field));
        counts[field] += 1;
        let f = &reader.fields()[field];
        let spec = match &v.pipeline {
            ViewPipeline::Spec(spec) => spec.clone(),
            ViewPipeline::Choice(DecoderChoice::Disabled) => continue,
            ViewPipeline::Choice(DecoderChoice::Decoder(d)) => PipelineSpec::from_arc(d.clone()),
            ViewPipeline::Choice(DecoderChoice::Default) => {
                PipelineSpec::from_arc(default_decoder(&f.field_type).ok_or_else(|| {
                    Error::NoDecoder {
                        path: reader.path().to_owned(),
                        field: v.name.clone(),
                        field_type: f.field_type.type_name(),
                    }
                })?)
            }
        };
        let view = ViewOf {
            name: v.name.clone(),
            index: counts[field],
            group: None,
        };
        runners.push(FieldRunner::new_view(
            reader,
            field,
            spec,
            (compile, pool, max_image_pixels),
            view,
        )?);
    }
    group_images(&mut runners, reader, views.policy)?;
    Ok(runners)
}

/// Makes a group of the runners of each image field with several views whose decoders are
/// all built-in crop decoders, and rebuilds their pipelines to read the group's rows.
fn group_images(runners: &mut [FieldRunner], reader: &Reader, policy: ViewsPolicy) -> Result<()> {
    for field in 0..reader.fields().len() {
        if reader.fields()[field].field_type != FieldType::RgbImage {
            continue;
        }
        let members: Vec<usize> = (0..runners.len())
            .filter(|&i| runners[i].field == field)
            .collect();
        if members.len() < 2 {
            continue;
        }
        let kinds: Option<Vec<_>> = members
            .iter()
            .map(|&i| {
                let d = &runners[i].spec.decoder;
                d.image_view().filter(|_| !d.dct_downscale())
            })
            .collect();
        let Some(kinds) = kinds else { continue };
        let group = Arc::new(ViewGroup {
            members: members.clone(),
            kinds,
            views: members.iter().map(|&i| runners[i].view_index()).collect(),
            policy,
        });
        for &i in &members {
            let r = &mut runners[i];
            let mut view = r.view.clone().unwrap_or_else(|| ViewOf {
                name: r.output.name.clone(),
                index: 0,
                group: None,
            });
            view.group = Some(Arc::clone(&group));
            r.set_view(reader, view)?;
        }
    }
    Ok(())
}
