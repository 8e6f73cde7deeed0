//! The process-cache flags (and QuasiRandom's buffer) `ffcv bench` and `ffcv doctor`
//! share, how they reach the loader, and how they are written back into a command line.

use std::fmt::Write as _;

use ffcv::LoaderBuilder;

use crate::byte_size::parse_byte_size;

/// Process-cache knobs on the command line (flattened into each command's arguments).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CacheArgs {
    /// Process cache: most memory for page slots (e.g. `512MiB`); `ffcv doctor` also
    /// judges the file against it as if it were the machine's memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_byte_size)]
    pub max_memory: Option<u64>,

    /// Process cache: page-reader threads, 1 to 1024 (default 12).
    #[arg(long, value_parser = crate::numeric_flags::threads::<u64>())]
    pub reader_threads: Option<u64>,

    /// Process cache: batches ahead at which a page may be fetched (default 3).
    #[arg(long)]
    pub prefetch_ahead: Option<u64>,

    /// Process cache: read pages with O_DIRECT.
    #[arg(long)]
    pub direct_io: bool,

    /// Process cache: read every page again each epoch, as FFCV does, instead of keeping
    /// pages still held in their slots from the epoch before.
    #[arg(long)]
    pub no_retain_pages: bool,

    /// Process cache: a slot for every page an epoch reads (slot memory for the whole
    /// dataset), so epochs after the first read nothing.
    #[arg(long)]
    pub hold_all_pages: bool,

    /// QuasiRandom: the buffer in pages (default: 2 x batch size, FFCV's; with the process
    /// cache, the largest buffer up to that whose page schedules fit the memory budget).
    #[arg(long, value_name = "PAGES", value_parser = clap::value_parser!(u64).range(1..))]
    pub quasi_buffer_pages: Option<u64>,

    /// Remote sources: also keep the pages read in DIR (shared by later runs and other
    /// processes on the node, one subfolder per object version; local files do not use it).
    #[arg(long, value_name = "DIR")]
    pub page_cache_dir: Option<std::path::PathBuf>,

    /// The most bytes --page-cache-dir may hold (e.g. `10G`; default 10GiB); least
    /// recently used pages are removed first.
    #[arg(long, value_name = "SIZE", value_parser = parse_cache_size, requires = "page_cache_dir")]
    pub page_cache_size: Option<u64>,

    /// Decoders: the largest image area (height x width pixels) accepted (default
    /// 134217728); a sample claiming more is an error naming it, before memory is sized
    /// from the claim.
    #[arg(long, value_name = "PIXELS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_image_pixels: Option<u64>,
}

/// `--page-cache-size`: a byte size above 0 (a cache of 0 bytes would store nothing).
fn parse_cache_size(text: &str) -> Result<u64, String> {
    match parse_byte_size(text)? {
        0 => Err(
            "0 bytes would store nothing: give a size such as 10GiB, or leave \
                  --page-cache-dir out"
                .into(),
        ),
        bytes => Ok(bytes),
    }
}

impl CacheArgs {
    /// The builder with these knobs set (those not given keep the loader's defaults).
    pub fn apply(&self, mut builder: LoaderBuilder) -> LoaderBuilder {
        builder = builder
            .direct_io(self.direct_io)
            .retain_pages(!self.no_retain_pages)
            .hold_all_pages(self.hold_all_pages);
        if let Some(bytes) = self.max_memory {
            builder = builder.max_memory(bytes);
        }
        if let Some(threads) = self.reader_threads {
            builder = builder.reader_threads(threads as usize);
        }
        if let Some(batches) = self.prefetch_ahead {
            builder = builder.prefetch_ahead(batches as usize);
        }
        if let Some(pixels) = self.max_image_pixels {
            builder = builder.max_image_pixels(pixels);
        }
        if let Some(pages) = self.quasi_buffer_pages {
            builder = builder.quasi_buffer_pages(usize::try_from(pages).unwrap_or(usize::MAX));
        }
        if let Some(dir) = &self.page_cache_dir {
            builder = builder.page_cache_dir(dir);
        }
        if let Some(bytes) = self.page_cache_size {
            builder = builder.page_cache_size(bytes);
        }
        builder
    }

    /// The flags that reproduce these knobs, each with a leading space (empty when none
    /// was given).
    pub fn flags(&self) -> String {
        let mut flags = String::new();
        if let Some(bytes) = self.max_memory {
            let _ = write!(flags, " --max-memory {bytes}");
        }
        if let Some(threads) = self.reader_threads {
            let _ = write!(flags, " --reader-threads {threads}");
        }
        if let Some(batches) = self.prefetch_ahead {
            let _ = write!(flags, " --prefetch-ahead {batches}");
        }
        if let Some(pixels) = self.max_image_pixels {
            let _ = write!(flags, " --max-image-pixels {pixels}");
        }
        if let Some(pages) = self.quasi_buffer_pages {
            let _ = write!(flags, " --quasi-buffer-pages {pages}");
        }
        if let Some(dir) = &self.page_cache_dir {
            let _ = write!(flags, " --page-cache-dir {}", dir.display());
        }
        if let Some(bytes) = self.page_cache_size {
            let _ = write!(flags, " --page-cache-size {bytes}");
        }
        for (flag, on) in [
            (" --direct-io", self.direct_io),
            (" --no-retain-pages", self.no_retain_pages),
            (" --hold-all-pages", self.hold_all_pages),
        ] {
            if on {
                flags.push_str(flag);
            }
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cache: CacheArgs,
    }

    #[test]
    fn flags_written_back_parse_to_the_same_knobs() {
        let given = [
            "ffcv",
            "--max-memory",
            "16MiB",
            "--reader-threads",
            "3",
            "--prefetch-ahead",
            "0",
            "--max-image-pixels",
            "1000",
            "--quasi-buffer-pages",
            "9",
            "--page-cache-dir",
            "/tmp/pages",
            "--page-cache-size",
            "1G",
            "--direct-io",
            "--no-retain-pages",
            "--hold-all-pages",
        ];
        let cache = Cli::parse_from(given).cache;
        assert_eq!(cache.max_memory, Some(16 << 20));
        let flags = cache.flags();
        assert_eq!(
            flags,
            " --max-memory 16777216 --reader-threads 3 --prefetch-ahead 0 \
             --max-image-pixels 1000 --quasi-buffer-pages 9 --page-cache-dir /tmp/pages \
             --page-cache-size 1073741824 --direct-io \
             --no-retain-pages --hold-all-pages"
        );
        let again = Cli::parse_from(std::iter::once("ffcv").chain(flags.split_whitespace())).cache;
        assert_eq!(format!("{again:?}"), format!("{cache:?}"));
        assert_eq!(Cli::parse_from(["ffcv"]).cache.flags(), "");
    }
}
