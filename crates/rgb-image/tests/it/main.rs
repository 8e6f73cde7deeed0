//! rgb-image's integration tests, one binary: decoding, encoding, resizing and cropping,
//! against libjpeg/PIL references and the test image folder.

mod image_support;

mod image_crop;
mod image_decode;
mod image_encode;
mod image_encode_libjpeg;
mod image_jpeg_layouts;
mod image_kernel;
mod image_kinds;
mod image_resize;
mod image_sources;
mod image_views;
