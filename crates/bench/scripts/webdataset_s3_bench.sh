#!/bin/bash
# `ffcv write webdataset` from and to S3 (a moto server on loopback) against local input
# and output, the same shards, three rounds alternating (docs/writing.md, "Conversion
# speed"). Each conversion as one file and as 8 shards (`--shards 8`, each shard
# uploaded as soon as it is written, while the next is written). Needs target/release/ffcv, target/moto-venv (moto[server], with boto3) and the
# shards of `webdataset_write_bench.py make /tmp/wds/shards --samples 2000 --shards 8`.
set -e
cd "$(dirname "$0")/../../.."
target/moto-venv/bin/moto_server -H 127.0.0.1 -p 5077 > /tmp/moto-bench.log 2>&1 &
MOTO=$!
trap "kill $MOTO" EXIT
sleep 3
export AWS_ENDPOINT_URL=http://127.0.0.1:5077 AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
target/moto-venv/bin/python - <<'PY'
import boto3, glob, os
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
s3.create_bucket(Bucket="bench-in"); s3.create_bucket(Bucket="bench-out")
for p in sorted(glob.glob("/tmp/wds/shards/*.tar")):
    s3.upload_file(p, "bench-in", "wds/" + os.path.basename(p))
PY
F="--field image=jpg:image --field label=cls:int --write-mode jpg --workers 1 --page-size 2MiB"
for round in 1 2 3; do
  for mode in pass 256; do
    if [ $mode = pass ]; then M="--max-resolution 512 --jpeg-passthrough"; else M="--max-resolution 256"; fi
    /usr/bin/time -f "local $mode round $round: %e s wall, %U user %S sys" target/release/ffcv write webdataset '/tmp/wds/shards/*.tar' /tmp/wds/local-$mode.beton $F $M > /dev/null
    /usr/bin/time -f "s3-in $mode round $round: %e s wall, %U user %S sys" target/release/ffcv write webdataset 's3://bench-in/wds/photos-*.tar' /tmp/wds/s3in-$mode.beton $F $M > /dev/null
    /usr/bin/time -f "s3-both $mode round $round: %e s wall, %U user %S sys" target/release/ffcv write webdataset 's3://bench-in/wds/photos-*.tar' s3://bench-out/r$round/$mode.beton $F $M > /dev/null
    /usr/bin/time -f "local-8 $mode round $round: %e s wall, %U user %S sys" target/release/ffcv write webdataset '/tmp/wds/shards/*.tar' /tmp/wds/local8-$mode.beton $F $M --shards 8 > /dev/null
    /usr/bin/time -f "s3-in-8 $mode round $round: %e s wall, %U user %S sys" target/release/ffcv write webdataset 's3://bench-in/wds/photos-*.tar' /tmp/wds/s3in8-$mode.beton $F $M --shards 8 > /dev/null
    /usr/bin/time -f "s3-both-8 $mode round $round: %e s wall, %U user %S sys" target/release/ffcv write webdataset 's3://bench-in/wds/photos-*.tar' s3://bench-out/r$round/$mode-8.beton $F $M --shards 8 > /dev/null
  done
done
cmp /tmp/wds/local-pass.beton /tmp/wds/s3in-pass.beton && echo "local and s3-in passthrough files identical"
target/moto-venv/bin/python - <<'PY'
import boto3, filecmp, os
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for k in range(8):
    name = f"-{k:05d}-of-00008.beton"
    s3.download_file("bench-out", f"r3/pass-8{name}", "/tmp/wds/fetched.beton")
    assert filecmp.cmp("/tmp/wds/fetched.beton", f"/tmp/wds/local8-pass{name}", shallow=False), name
print("uploaded and local passthrough shards identical")
PY
uptime
