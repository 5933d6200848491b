# experiments/decode_l2_prefetch: its variants (order x tiles) into /tmp/pfv/ORDER_pN, for
# scripts/gpu_template_ab.py --alt. Run from the repository root.
for order in select before_q after_q; do for p in 1 2 4; do
  d=/tmp/pfv/${order}_p$p; mkdir -p $d
  sed -e "s/{% set prefetch_tiles = 2 %}/{% set prefetch_tiles = $p %}/" -e "s/{% set prefetch_order = \"select\" %}/{% set prefetch_order = \"$order\" %}/" \
    experiments/decode_l2_prefetch/decode_paged.py.jinja > $d/decode_paged.py.jinja
done; done
