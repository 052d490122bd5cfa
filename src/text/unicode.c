/* unicode: UTF-8 coding and the character classes of the BERT and GPT-2
 * tokenizers. See text_internal.h for the source of each definition. */
#include "text_internal.h"

#include <string.h>
#include <utf8proc.h>

size_t cz_utf8_decode(const unsigned char *p, size_t n, uint32_t *cp) {
    unsigned c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (p[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

uint32_t cz_utf8_next(const unsigned char *s, size_t len, size_t *i) {
    uint32_t cp;
    size_t n = cz_utf8_decode(s + *i, len - *i, &cp);
    *i += n ? n : 1;
    return n ? cp : 0xFFFD;
}

size_t cz_utf8_invalid_at(const unsigned char *s, size_t len) {
    uint32_t cp;
    for (size_t i = 0; i < len;) {
        size_t n = cz_utf8_decode(s + i, len - i, &cp);
        if (n == 0) return i;
        i += n;
    }
    return len;
}

int cz_utf8_put(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int cz_is_bert_space(uint32_t cp) {
    if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') return 1;
    if (cp < 0x80) return 0;
    int c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

int cz_is_bert_control(uint32_t cp) {
    /* As HF's fast BertNormalizer (Rust unicode_categories is_other): Cc, Cf,
     * Cs, Co, but not unassigned code points (Cn), which stay in the word. */
    if (cp == '\t' || cp == '\n' || cp == '\r') return 0;
    int c = utf8proc_category((utf8proc_int32_t)cp);
    return c >= UTF8PROC_CATEGORY_CC;
}

int cz_is_bert_punct(uint32_t cp) {
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
        (cp >= 123 && cp <= 126))
        return 1;
    if (cp < 0x80) return 0;
    int c = utf8proc_category((utf8proc_int32_t)cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

int cz_is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

int cz_is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

int cz_is_letter(uint32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    int c = utf8proc_category((utf8proc_int32_t)cp);
    return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
}

int cz_is_number(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    int c = utf8proc_category((utf8proc_int32_t)cp);
    return c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
}

int cz_bert_normalize_char(uint32_t cp, int lower, int strip_accents, uint32_t out[18]) {
    /* Per character, as HF's BertNormalizer (Rust char::to_lowercase, so no
     * context-dependent final sigma) does. The slow Python tokenizer lowers
     * whole words (str.lower) and differs only for a word-final capital sigma. */
    if (lower) cp = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    if (!strip_accents) {
        out[0] = cp;
        return 1;
    }
    utf8proc_int32_t buf[18];
    int last = 0;
    utf8proc_ssize_t n =
        utf8proc_decompose_char((utf8proc_int32_t)cp, buf, 18, UTF8PROC_DECOMPOSE, &last);
    if (n < 0 || n > 18) {
        out[0] = cp;
        return 1;
    }
    int k = 0;
    for (utf8proc_ssize_t j = 0; j < n; j++)
        if (utf8proc_category(buf[j]) != UTF8PROC_CATEGORY_MN) out[k++] = (uint32_t)buf[j];
    return k;
}

uint64_t cz_hash_bytes(const void *data, size_t len) {
    /* 8 bytes per step, multiply-xorshift mixing (a la wyhash/murmur); not
     * cryptographic, only spreads short token strings over a table. */
    const unsigned char *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (len * 0xC2B2AE3D27D4EB4FULL);
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        p += 8, len -= 8;
    }
    uint64_t v = 0;
    for (size_t k = 0; k < len; k++) v |= (uint64_t)p[k] << (8 * k);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 32;
    return h;
}
