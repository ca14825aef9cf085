/* aotc runtime: NonMaxSuppression (float32 boxes and scores).
 *
 * Per batch and class: the boxes scoring above the threshold, by score (ties: lower
 * index first), each kept unless its IoU with a box already kept exceeds the IoU
 * threshold, at most max_per_class kept. Rows [batch, class, box] go to `out` in
 * that order; their count is returned through *count (never more than `capacity`). */
#ifndef AOTC_NMS_H_
#define AOTC_NMS_H_

#include "aotc_base.h"

/* Box i as (x_min, y_min, x_max, y_max). */
AOTC_FN void aotc_nms_corners(const float *box, int center_point_box, float c[4]) {
  if (center_point_box) {
    c[0] = box[0] - box[2] / 2;
    c[2] = box[0] + box[2] / 2;
    c[1] = box[1] - box[3] / 2;
    c[3] = box[1] + box[3] / 2;
  } else {   /* [y1, x1, y2, x2], any two opposite corners */
    c[0] = AOTC_MIN(box[1], box[3]);
    c[2] = AOTC_MAX(box[1], box[3]);
    c[1] = AOTC_MIN(box[0], box[2]);
    c[3] = AOTC_MAX(box[0], box[2]);
  }
}

AOTC_FN int aotc_nms_suppresses(const float *a, const float *b, int center_point_box,
                                float iou_threshold) {
  float ca[4], cb[4], ix0, ix1, iy0, iy1, inter, area_a, area_b, uni;
  aotc_nms_corners(a, center_point_box, ca);
  aotc_nms_corners(b, center_point_box, cb);
  ix0 = AOTC_MAX(ca[0], cb[0]);
  ix1 = AOTC_MIN(ca[2], cb[2]);
  iy0 = AOTC_MAX(ca[1], cb[1]);
  iy1 = AOTC_MIN(ca[3], cb[3]);
  if (ix1 <= ix0 || iy1 <= iy0) return 0;
  inter = (ix1 - ix0) * (iy1 - iy0);
  area_a = (ca[2] - ca[0]) * (ca[3] - ca[1]);
  area_b = (cb[2] - cb[0]) * (cb[3] - cb[1]);
  uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return 0;
  return inter / uni > iou_threshold;
}

/* Stable merge sort of idx[0, n) by score descending; tmp holds n entries. */
AOTC_FN void aotc_nms_sort(int64_t *idx, int64_t *tmp, int64_t n, const float *score) {
  int64_t width, lo, i;
  for (width = 1; width < n; width *= 2) {
    for (lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = AOTC_MIN(lo + width, n), hi = AOTC_MIN(lo + 2 * width, n);
      int64_t a = lo, b = mid, k = lo;
      while (a < mid && b < hi) tmp[k++] = score[idx[b]] > score[idx[a]] ? idx[b++] : idx[a++];
      while (a < mid) tmp[k++] = idx[a++];
      while (b < hi) tmp[k++] = idx[b++];
    }
    for (i = 0; i < n; i++) idx[i] = tmp[i];
  }
}

/* scratch: 3 * boxes int64 entries. max_per_class, iou and score thresholds may be
 * NULL (absent inputs: 0 boxes, threshold 0, no score filter). */
AOTC_FN void aotc_nms(const float *boxes, const float *scores, const int64_t *max_per_class,
                      const float *iou_threshold, const float *score_threshold, int64_t batches,
                      int64_t classes, int64_t nboxes, int center_point_box, int64_t *out,
                      int64_t capacity, int64_t *count, int64_t *scratch) {
  const int64_t limit = max_per_class ? AOTC_MAX(max_per_class[0], 0) : 0;
  const float iou = iou_threshold ? iou_threshold[0] : 0.0f;
  int64_t *cand = scratch, *tmp = scratch + nboxes, *kept = scratch + 2 * nboxes;
  int64_t b, c, i, j, rows = 0;
  for (b = 0; b < batches; b++)
    for (c = 0; c < classes; c++) {
      const float *s = scores + (b * classes + c) * nboxes;
      const float *bx = boxes + b * nboxes * 4;
      int64_t n = 0, nkept = 0;
      for (i = 0; i < nboxes; i++)
        if (!score_threshold || s[i] > score_threshold[0]) cand[n++] = i;
      aotc_nms_sort(cand, tmp, n, s);
      for (i = 0; i < n && nkept < limit; i++) {
        int keep = 1;
        for (j = 0; j < nkept && keep; j++)
          if (aotc_nms_suppresses(bx + cand[i] * 4, bx + kept[j] * 4, center_point_box, iou)) keep = 0;
        if (!keep) continue;
        kept[nkept++] = cand[i];
        if (rows < capacity) {
          out[3 * rows] = b;
          out[3 * rows + 1] = c;
          out[3 * rows + 2] = cand[i];
          rows++;
        }
      }
    }
  *count = rows;
}

#endif
