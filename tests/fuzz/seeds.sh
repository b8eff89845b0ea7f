#!/bin/sh
# seeds.sh KIND DIR - fills DIR afresh with the seed corpus of one fuzz target: the files in
# tests/fuzz/corpus_KIND (for model also its findings in tests/malformed/crashes) plus the small
# cases of tests/data (param text, bin archives, npy
# tensors, param NUL bin for whole models, or the JPEG files of tests/data/jpeg).
set -eu
kind=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"
if [ -d "tests/fuzz/corpus_$kind" ]; then
    cp "tests/fuzz/corpus_$kind"/* "$dir"/ 2>/dev/null || true
fi
if [ "$kind" = model ]; then # its findings (tests/malformed/crashes), checked first
    cp tests/malformed/crashes/model_*.fuzz "$dir"/
fi
if [ "$kind" = jpeg ]; then
    cp tests/data/jpeg/*.jpg "$dir"/
fi
for c in tests/data/ops/* tests/data/nets/*; do
    [ -d "$c" ] || continue # a case is a directory
    name=$(basename "$c")
    case $kind in
    param)
        for p in "$c"/*.pnnx.param; do
            cp "$p" "$dir/${name}_$(basename "$p")"
        done
        ;;
    zip)
        [ "$(wc -c < "$c/model.pnnx.bin")" -le 16384 ] && cp "$c/model.pnnx.bin" "$dir/$name.bin"
        ;;
    npy)
        for p in "$c"/*.npy; do
            [ "$(wc -c < "$p")" -le 16384 ] && cp "$p" "$dir/${name}_$(basename "$p")"
        done
        ;;
    model)
        if [ "$(wc -c < "$c/model.pnnx.bin")" -le 12288 ]; then
            { cat "$c/model.pnnx.param"; printf '\000'; cat "$c/model.pnnx.bin"; } > "$dir/$name"
        fi
        ;;
    esac
done
true
