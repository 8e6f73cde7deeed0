//! The test image folder: small real photographs (`tests/data/photos`) and
//! every odd format a real folder may hold, generated from them here
//! (CMYK, YCCK, RGB-coded, gray, 4:4:4 / 4:2:2 / 4:4:0 / 4:1:1, restarts, progressive,
//! PNG of every colour type and depth, a PNG named `.JPEG`, a truncated
//! file). Used by rgb-image's and the command line's image tests.

use std::path::Path;

use jpeg_encoder::{ColorType, Encoder, SamplingFactor};

/// The committed photographs (see their README for sources and licences).
pub const PHOTOS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../rgb-image/tests/data/photos"
);

/// One file of the folder.
pub struct Variant {
    /// The class subfolder.
    pub class: &'static str,
    /// The file name.
    pub name: String,
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// Whether PIL (and we) can decode it.
    pub readable: bool,
}

/// The photographs as committed, by name.
pub const PHOTO_NAMES: [&str; 5] = [
    "astronaut.jpg",
    "chelsea.jpg",
    "chelsea_progressive.jpg",
    "coffee.jpg",
    "rocket.jpg",
];

fn photo(name: &str) -> Vec<u8> {
    std::fs::read(format!("{PHOTOS}/{name}")).expect("read a test photograph")
}

/// Packed RGB pixels of a photograph (decoded by the code under test; any
/// decode will do, they are only the source of the generated variants).
fn pixels(name: &str) -> (u32, u32, Vec<u8>) {
    let img = rgb_image::read_image_bytes(&photo(name)).expect("decode a test photograph");
    (img.width(), img.height(), img.into_pixels())
}

fn jpeg(
    px: &[u8],
    (w, h): (u32, u32),
    color: ColorType,
    sampling: SamplingFactor,
    tweak: impl FnOnce(&mut Encoder<&mut Vec<u8>>),
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = Encoder::new(&mut out, 88);
    enc.set_sampling_factor(sampling);
    tweak(&mut enc);
    enc.encode(px, w as u16, h as u16, color)
        .expect("jpeg-encoder");
    out
}

fn png(w: u32, h: u32, color: png::ColorType, depth: png::BitDepth, data: &[u8]) -> Vec<u8> {
    png_with(w, h, color, depth, data, |_| {})
}

fn png_with(
    w: u32,
    h: u32,
    color: png::ColorType,
    depth: png::BitDepth,
    data: &[u8],
    tweak: impl FnOnce(&mut png::Encoder<'_, &mut Vec<u8>>),
) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(color);
        enc.set_depth(depth);
        tweak(&mut enc);
        let mut writer = enc.write_header().expect("png header");
        writer.write_image_data(data).expect("png data");
    }
    out
}

/// A crop of `px` (`w` wide) to columns `0..cw`, rows `0..ch`.
fn crop(px: &[u8], w: u32, (cw, ch): (u32, u32)) -> Vec<u8> {
    (0..ch as usize)
        .flat_map(|y| px[y * w as usize * 3..][..cw as usize * 3].to_vec())
        .collect()
}

/// Packs `bits`-bit values (one per pixel) into PNG rows of `w` pixels.
fn pack(values: &[u8], w: usize, bits: usize) -> Vec<u8> {
    let per = 8 / bits;
    values
        .chunks(w)
        .flat_map(|row| {
            row.chunks(per).map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u8, |acc, (i, &v)| acc | (v << (8 - bits * (i + 1))))
            })
        })
        .collect()
}

/// Every file of the test folder.
pub fn variants() -> Vec<Variant> {
    let mut v = Vec::new();
    let mut add = |class, name: &str, bytes, readable| {
        v.push(Variant {
            class,
            name: name.to_owned(),
            bytes,
            readable,
        })
    };
    for name in PHOTO_NAMES {
        add("a_photos", name, photo(name), true);
    }

    let (w, h, px) = pixels("coffee.jpg");
    let size = (w, h);
    let rgb = ColorType::Rgb;
    let j = |c, s| jpeg(&px, size, c, s, |_| {});
    add(
        "b_jpeg",
        "coffee_444.jpg",
        j(rgb, SamplingFactor::R_4_4_4),
        true,
    );
    add(
        "b_jpeg",
        "coffee_422.jpg",
        j(rgb, SamplingFactor::R_4_2_2),
        true,
    );
    add(
        "b_jpeg",
        "coffee_440.jpg",
        j(rgb, SamplingFactor::R_4_4_0),
        true,
    );
    add(
        "b_jpeg",
        "coffee_411.jpg",
        j(rgb, SamplingFactor::R_4_1_1),
        true,
    );
    let gray: Vec<u8> = px
        .chunks_exact(3)
        .map(|p| {
            ((u32::from(p[0]) * 299 + u32::from(p[1]) * 587 + u32::from(p[2]) * 114) / 1000) as u8
        })
        .collect();
    add(
        "b_jpeg",
        "coffee_gray.jpg",
        jpeg(
            &gray,
            size,
            ColorType::Luma,
            SamplingFactor::R_4_4_4,
            |_| {},
        ),
        true,
    );
    add(
        "b_jpeg",
        "coffee_restart.jpg",
        jpeg(&px, size, rgb, SamplingFactor::R_4_2_0, |e| {
            e.set_restart_interval(7)
        }),
        true,
    );
    add(
        "b_jpeg",
        "coffee_progressive.jpg",
        jpeg(&px, size, rgb, SamplingFactor::R_4_2_0, |e| {
            e.set_progressive(true)
        }),
        true,
    );
    // RGB-coded (no colour transform): the pixels given as "YCbCr" so the
    // encoder stores them as they are, its JFIF marker replaced by an Adobe
    // marker with transform 0, which makes libjpeg read them as RGB.
    let mut rgb_coded = jpeg(&px, size, ColorType::Ycbcr, SamplingFactor::R_4_4_4, |_| {});
    assert_eq!(
        rgb_coded[2..4],
        [0xFF, 0xE0],
        "jpeg-encoder writes JFIF first"
    );
    let app0_end = 4 + usize::from(u16::from_be_bytes([rgb_coded[4], rgb_coded[5]]));
    let adobe = [
        0xFF, 0xEE, 0, 14, b'A', b'd', b'o', b'b', b'e', 0, 100, 0, 0, 0, 0, 0,
    ];
    rgb_coded.splice(2..app0_end, adobe);
    add("b_jpeg", "coffee_rgb_adobe.jpg", rgb_coded, true);
    // CMYK as Photoshop writes it (Adobe APP14, inverted), and as YCCK.
    let cmyk: Vec<u8> = px
        .chunks_exact(3)
        .flat_map(|p| {
            let max = p[0].max(p[1]).max(p[2]);
            [max - p[0], max - p[1], max - p[2], 255 - max]
        })
        .collect();
    add(
        "b_jpeg",
        "coffee_cmyk.jpg",
        jpeg(
            &cmyk,
            size,
            ColorType::Cmyk,
            SamplingFactor::R_4_4_4,
            |_| {},
        ),
        true,
    );
    add(
        "b_jpeg",
        "coffee_ycck.jpg",
        jpeg(
            &cmyk,
            size,
            ColorType::CmykAsYcck,
            SamplingFactor::R_4_2_0,
            |_| {},
        ),
        true,
    );
    // Odd sides: partial MCUs and the upsamplers' right and bottom edges.
    let (aw, _, apx) = pixels("astronaut.jpg");
    let odd = (333, 217);
    let opx = crop(&apx, aw, odd);
    add(
        "b_jpeg",
        "astronaut_odd_420.jpg",
        jpeg(&opx, odd, rgb, SamplingFactor::R_4_2_0, |_| {}),
        true,
    );
    add(
        "b_jpeg",
        "astronaut_odd_422_progressive.jpg",
        jpeg(&opx, odd, rgb, SamplingFactor::R_4_2_2, |e| {
            e.set_progressive(true)
        }),
        true,
    );

    // PNG: every colour type and depth.
    let (cw, ch, cpx) = pixels("chelsea.jpg");
    let (cw, ch) = (cw.min(300), ch.min(200));
    let cpx = crop(&cpx, 451, (cw, ch));
    let n = (cw * ch) as usize;
    let cgray: Vec<u8> = cpx.chunks_exact(3).map(|p| p[1]).collect();
    let alpha = |i: usize| (i * 7 % 256) as u8;
    let c8 = png::BitDepth::Eight;
    let c16 = png::BitDepth::Sixteen;
    use png::ColorType as Pc;
    add(
        "c_png",
        "chelsea_rgb.png",
        png(cw, ch, Pc::Rgb, c8, &cpx),
        true,
    );
    let rgba: Vec<u8> = cpx
        .chunks_exact(3)
        .enumerate()
        .flat_map(|(i, p)| [p[0], p[1], p[2], alpha(i)])
        .collect();
    add(
        "c_png",
        "chelsea_rgba.png",
        png(cw, ch, Pc::Rgba, c8, &rgba),
        true,
    );
    add(
        "c_png",
        "chelsea_gray.png",
        png(cw, ch, Pc::Grayscale, c8, &cgray),
        true,
    );
    let ga: Vec<u8> = cgray
        .iter()
        .enumerate()
        .flat_map(|(i, &g)| [g, alpha(i)])
        .collect();
    add(
        "c_png",
        "chelsea_gray_alpha.png",
        png(cw, ch, Pc::GrayscaleAlpha, c8, &ga),
        true,
    );
    let g4: Vec<u8> = cgray.iter().map(|&g| g >> 4).collect();
    add(
        "c_png",
        "chelsea_gray4.png",
        png(
            cw,
            ch,
            Pc::Grayscale,
            png::BitDepth::Four,
            &pack(&g4, cw as usize, 4),
        ),
        true,
    );
    // 16-bit: distinct low bytes, so taking the high byte is visible.
    let rgb16: Vec<u8> = cpx
        .iter()
        .enumerate()
        .flat_map(|(i, &b)| [b, (i * 13 % 256) as u8])
        .collect();
    add(
        "c_png",
        "chelsea_rgb16.png",
        png(cw, ch, Pc::Rgb, c16, &rgb16),
        true,
    );
    let g16: Vec<u8> = cgray
        .iter()
        .enumerate()
        .flat_map(|(i, &g)| [g, (i * 29 % 256) as u8])
        .collect();
    add(
        "c_png",
        "chelsea_gray16.png",
        png(cw, ch, Pc::Grayscale, c16, &g16),
        true,
    );
    // Palette: a 6x6x6 colour cube, 8-bit indices, with and without tRNS;
    // and a 16-colour 4-bit palette.
    let cube: Vec<u8> = (0..216u32)
        .flat_map(|i| {
            [
                (i / 36) as u8 * 51,
                (i / 6 % 6) as u8 * 51,
                (i % 6) as u8 * 51,
            ]
        })
        .collect();
    let q = |b: u8| (u32::from(b) + 25) / 51;
    let idx: Vec<u8> = cpx
        .chunks_exact(3)
        .map(|p| (q(p[0]) * 36 + q(p[1]) * 6 + q(p[2])) as u8)
        .collect();
    add(
        "c_png",
        "chelsea_palette.png",
        png_with(cw, ch, Pc::Indexed, c8, &idx, |e| {
            e.set_palette(cube.clone())
        }),
        true,
    );
    let trns: Vec<u8> = (0..216u32).map(|i| (i * 5 % 256) as u8).collect();
    add(
        "c_png",
        "chelsea_palette_trns.png",
        png_with(cw, ch, Pc::Indexed, c8, &idx, |e| {
            e.set_palette(cube.clone());
            e.set_trns(trns.clone());
        }),
        true,
    );
    let pal16: Vec<u8> = (0..16u8)
        .flat_map(|i| [i * 17, 255 - i * 17, i * 8])
        .collect();
    let idx4: Vec<u8> = cgray.iter().map(|&g| g >> 4).collect();
    add(
        "c_png",
        "chelsea_palette4.png",
        png_with(
            cw,
            ch,
            Pc::Indexed,
            png::BitDepth::Four,
            &pack(&idx4, cw as usize, 4),
            |e| e.set_palette(pal16.clone()),
        ),
        true,
    );
    // An extension that lies (as ImageNet holds one).
    add(
        "c_png",
        "n02105855_2933.JPEG",
        png(cw, ch, Pc::Rgb, c8, &cpx),
        true,
    );
    assert_eq!(n * 3, cpx.len());

    // Unreadable: a JPEG cut in the middle of its scan.
    let cut = photo("coffee.jpg");
    add(
        "b_jpeg",
        "truncated.jpg",
        cut[..cut.len() * 3 / 5].to_vec(),
        false,
    );
    v
}

/// Files a folder also holds that are not images (ignored, counted).
pub const NON_IMAGES: [(&str, &str); 2] = [("a_photos", "README.txt"), ("c_png", ".DS_Store")];

/// Writes the folder under `dir` (one subfolder per class).
pub fn write_folder(dir: &Path) -> Vec<Variant> {
    let all = variants();
    for v in &all {
        let class = dir.join(v.class);
        std::fs::create_dir_all(&class).expect("create a class folder");
        std::fs::write(class.join(&v.name), &v.bytes).expect("write a test image");
    }
    for (class, name) in NON_IMAGES {
        std::fs::write(dir.join(class).join(name), b"not an image\n").expect("write a non-image");
    }
    all
}
