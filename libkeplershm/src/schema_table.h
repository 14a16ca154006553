/* The field schema generated from keplershm.h at build time (see tools/gen_schema.py). */
#ifndef KEPLERSHM_SCHEMA_TABLE_H
#define KEPLERSHM_SCHEMA_TABLE_H
#include "keplershm.h"
#ifdef __cplusplus
extern "C" {
#endif
extern const struct keplershm_field keplershm_schema_table[];
extern const uint32_t keplershm_schema_count;
#ifdef __cplusplus
}
#endif
#endif
