"""The first stages ``benchmarks/first_stage_scale.py`` measures: ``SPECS`` by default, ``EXTRA_SPECS`` by ``--only``
(``--only "scan:rows=int8"`` runs every listed spec whose parameters include those given); ``BUILD_KEYS``: the
parameters that make another build (the others are search parameters of one build)."""

SPECS = [("scan", {"loops": "numba", "coarse": "0", "rescore": "1000"}),  # the loop before the compiled one
         ("scan", {"coarse": "0", "rescore": "500"}), ("scan", {"coarse": "0", "rescore": "1000"}),
         ("scan", {"coarse": "0", "rescore": "2000"}),  # one pass of the 32-byte codes
         ("scan", {"coarse": "16", "rescore": "1000"}), ("scan", {"coarse": "16", "rescore": "2000"}),  # the funnel
         ("scan", {"coarse": "16", "rescore": "2500"}),
         ("faiss:IVF4096,Flat", {"nprobe": "128", "clips_per_video": "16"})]
EXTRA_SPECS = [("scan", {"m": "16", "rescore": "1000"}), ("scan", {"m": "16", "rescore": "2000"}),
               ("scan", {"m": "16", "rescore": "2500"}), ("scan", {"m": "16", "rescore": "3000"}),
               ("scan", {"m": "16", "rescore": "4000"}),
               # 7-bit codes (128 centroids: one look-up instruction for 64 clips), by --only scan:bits=7
               ("scan", {"bits": "7", "coarse": "0", "rescore": "1000"}),
               ("scan", {"bits": "7", "coarse": "0", "rescore": "1500"}),
               ("scan", {"bits": "7", "coarse": "0", "rescore": "2000"}),
               ("scan", {"bits": "7", "coarse": "0", "rescore": "3000"}),
               # the int8 tier between the codes and the fp16 rows, by --only scan:rows=int8 (the default where the
               # rows exceed memory, scan_rows8.default_rows), beside the fp16 rows named as such
               ("scan", {"coarse": "16", "rows": "fp16", "rescore": "2500"}),
               ("scan", {"coarse": "0", "rows": "int8", "rescore": "1000", "exact": "100"}),
               ("scan", {"coarse": "0", "rows": "int8", "rescore": "2000", "exact": "100"}),
               ("scan", {"coarse": "0", "rows": "int8", "rescore": "2000", "exact": "200"}),
               ("scan", {"coarse": "16", "rows": "int8", "rescore": "2500", "exact": "100"}),
               ("scan", {"coarse": "16", "rows": "int8", "rescore": "2500", "exact": "200"}),
               # the int8 rows' pass over every clip for the whole batch (scan_rows8.Rows8.candidates), from batch 1
               ("scan", {"coarse": "16", "rows": "int8", "rescore": "2500", "exact": "200", "int8_batch": "1"}),
               ("scan", {"coarse": "0", "rows": "int8", "rescore": "1000", "exact": "200", "int8_batch": "1"}),
               ("scan", {"coarse": "0", "rows": "fp16", "rescore": "1000"}),  # the codes without the tier
               ("scan", {"coarse": "16", "rows": "int8", "rescore": "2500", "exact": "300", "int8_batch": "1"}),
               ("scan", {"coarse": "16", "rows": "int8", "rescore": "2500", "exact": "200", "int8_batch": "100000"}),
               ("faiss:Flat", {}),  # by --only: slow (Flat) or long to build (HNSW: 15 min at 100k)
               ("faiss:HNSW32", {"efSearch": "800", "clips_per_video": "8"}),
               ("faiss:HNSW32", {"efSearch": "1600", "clips_per_video": "16"}),
               ("faiss:HNSW32", {"efSearch": "3200", "clips_per_video": "32"}),
               ("faiss:HNSW32", {"efSearch": "6400", "clips_per_video": "64"}),
               ("milvus", {"index_type": "IVF_FLAT", "nlist": "4096", "nprobe": "128", "clips_per_video": "16"}),
               # rounds grown until certified (issue 71): an exhaustive FLAT, and HNSW on a server
               ("milvus", {"index_type": "FLAT", "clips_per_video": "8"}),
               ("milvus", {"index_type": "HNSW", "M": "16", "efConstruction": "64", "clips_per_video": "8"}),
               ("milvus", {"index_type": "HNSW", "M": "16", "efConstruction": "64", "clips_per_video": "32"}),
               ("milvus", {"index_type": "HNSW", "M": "16", "efConstruction": "64", "ef": "4096",
                           "clips_per_video": "8"})]
BUILD_KEYS = ("nlist", "index_type", "m", "M", "efConstruction", "coarse", "loops", "bits", "rows")
