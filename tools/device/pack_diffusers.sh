#!/usr/bin/env bash
# Here, before a GPU session: copies diffusers' Python package (its models, not its pipelines)
# from a diffusers checkout into .devsrc/, which travels with a device call (carry: [".devsrc"])
# so that first_contact.sh's host_ops step can build diffusers' own DiT blocks there (the GPU
# machine's image has PyTorch but no diffusers, and reaches no registry). The commit is kept
# in .devsrc/COMMIT and cited in every row the step writes.
#   bash tools/device/pack_diffusers.sh PATH      PATH: a diffusers git checkout (or bare repo)
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: tools/device/pack_diffusers.sh DIFFUSERS_GIT_DIR" >&2; exit 2; }
src=$1
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null) ||
  { echo "pack_diffusers: $src is not a git checkout of diffusers" >&2; exit 2; }
git -C "$src" cat-file -e "HEAD:src/diffusers/models/transformers/transformer_flux.py" 2>/dev/null ||
  { echo "pack_diffusers: $src at $commit has no src/diffusers/models/transformers/transformer_flux.py" >&2; exit 2; }
cd "$(dirname "$0")/../.."
dest=.devsrc
grep -qx "/$dest/" .gitignore || { echo "pack_diffusers: .gitignore must ignore /$dest/" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
git -C "$src" archive HEAD src/diffusers | tar -x -C "$dest" --strip-components=1
# The pipelines are imported lazily by name and not needed to build a block: about 16 MB less.
rm -rf "$dest"/diffusers/pipelines/*/ "$dest"/diffusers/modular_pipelines/*/
echo "huggingface/diffusers@$commit" >"$dest/COMMIT"
echo "pack_diffusers: $(du -sh "$dest" | cut -f1) in $dest from huggingface/diffusers@$commit"
