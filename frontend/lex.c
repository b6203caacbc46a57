/* frontend/lex.c: bytes to tokens.
 *
 * The lexer is a cursor over the source (its state is four words, so the
 * parser looks ahead by copying it) and never reports anything itself: a
 * bad byte or number becomes a TOK_ERROR token that the parser reports with
 * fe_lex_report when, and only when, it reaches it. Bad bytes inside a
 * statement the parser is already skipping therefore add no noise.
 *
 * The source is len bytes and may hold NULs and invalid UTF-8: each such
 * byte is one TOK_ERROR. Columns count bytes from 1. A UTF-8 byte-order
 * mark (EF BB BF, which some editors write) at the start of the source is
 * skipped and not counted; anywhere else it is one TOK_ERROR.
 *
 * Numbers: digits, then '.' and digits, then an exponent, each part
 * optional but not all (`768`, `0.125`, `2.`, `.5`, `1e-5`). A '.' followed
 * by another '.' is not part of the number, so `1..128` is INT DOTDOT INT.
 * A number running into letters (`2x`, `0x10`, `1e`) is malformed.
 */
#include "frontend/ast.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const tok_str[] = {
#define X(e, s) s,
    FE_TOKENS(X)
#undef X
};

const char *fe_tok_str(TokKind k)
{
    IR_ASSERT(k >= 0 && k < TOK_COUNT);
    return tok_str[k];
}

static const char bom[3] = "\xef\xbb\xbf";

void fe_lex_init(Lexer *lx, const Source *src, Arena *a)
{
    lx->p = src->text ? src->text : "";
    lx->end = lx->p + (src->text ? src->len : 0);
    if (lx->end - lx->p >= 3 && !memcmp(lx->p, bom, 3))
        lx->p += 3;
    lx->line = lx->col = 1;
    lx->arena = a;
}

/* The byte k ahead, or -1 past the end. */
static int peek(const Lexer *lx, int k)
{
    return lx->end - lx->p > k ? (unsigned char)lx->p[k] : -1;
}

static void bump(Lexer *lx)
{
    if (*lx->p++ == '\n') {
        lx->line++;
        lx->col = 1;
    } else {
        lx->col++;
    }
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_alnum(int c) { return is_alpha(c) || is_digit(c); }

/* Skips blanks and comments, not newlines. */
static void skip_blanks(Lexer *lx)
{
    for (;;) {
        int c = peek(lx, 0);
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v')
            bump(lx);
        else if (c == '#')
            while (peek(lx, 0) >= 0 && peek(lx, 0) != '\n')
                bump(lx);
        else
            return;
    }
}

static void digits(Lexer *lx)
{
    while (is_digit(peek(lx, 0)))
        bump(lx);
}

static Token number(Lexer *lx, Token t)
{
    bool is_float = false, big = false;
    int64_t v = 0;
    for (int c; is_digit(c = peek(lx, 0)); bump(lx)) {
        if (v > (INT64_MAX - (c - '0')) / 10)
            big = true;
        else
            v = v * 10 + (c - '0');
    }
    if (peek(lx, 0) == '.' && peek(lx, 1) != '.') {
        is_float = true;
        bump(lx);
        digits(lx);
    }
    int c = peek(lx, 0), s = peek(lx, 1);
    if ((c == 'e' || c == 'E') &&
        (is_digit(s) || ((s == '+' || s == '-') && is_digit(peek(lx, 2))))) {
        is_float = true;
        bump(lx);
        bump(lx);
        digits(lx);
    }
    bool junk = is_alnum(peek(lx, 0));
    while (is_alnum(peek(lx, 0)))
        bump(lx);
    t.len = (int)(lx->p - t.text);
    if (junk) {
        t.kind = TOK_ERROR;
        t.err = LEX_BADNUM;
    } else if (!is_float) {
        t.kind = big ? TOK_ERROR : TOK_INT;
        t.err = big ? LEX_BIGINT : LEX_OK;
        t.ival = v;
    } else {
        t.text = ir_arena_strndup(lx->arena, t.text, (size_t)t.len);
        t.fval = strtod(t.text, NULL);
        t.kind = isinf(t.fval) ? TOK_ERROR : TOK_FLOAT;
        t.err = isinf(t.fval) ? LEX_BIGFLOAT : LEX_OK;
    }
    return t;
}

static TokKind keyword(const char *s, int len);

bool fe_lex_is_keyword(const char *s) { return keyword(s, (int)strlen(s)) != TOK_IDENT; }

static TokKind keyword(const char *s, int len)
{
    static const struct { const char *s; TokKind k; } kw[] = {
        {"dim", TOK_DIM}, {"in", TOK_IN}, {"input", TOK_INPUT}, {"output", TOK_OUTPUT},
        {"const", TOK_CONST},
    };
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if ((size_t)len == strlen(kw[i].s) && !memcmp(s, kw[i].s, (size_t)len))
            return kw[i].k;
    return TOK_IDENT;
}

/* An operator or punctuation token, or TOK_ERROR; consumes its bytes. */
static TokKind punct(Lexer *lx)
{
    static const struct { char s[3]; TokKind k; } ops[] = {
        /* two-byte spellings first, so "<=" wins over "<" */
        {"..", TOK_DOTDOT}, {"||", TOK_OROR}, {"&&", TOK_ANDAND}, {"<=", TOK_LE},
        {">=", TOK_GE}, {"==", TOK_EQ}, {"!=", TOK_NE},
        {"(", TOK_LPAREN}, {")", TOK_RPAREN}, {"[", TOK_LBRACK}, {"]", TOK_RBRACK},
        {",", TOK_COMMA}, {":", TOK_COLON}, {";", TOK_SEMI}, {"=", TOK_ASSIGN},
        {"?", TOK_QUEST}, {"<", TOK_LT}, {">", TOK_GT}, {"+", TOK_PLUS},
        {"-", TOK_MINUS}, {"*", TOK_STAR}, {"/", TOK_SLASH}, {"%", TOK_PERCENT},
        {"!", TOK_BANG},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int n = ops[i].s[1] ? 2 : 1;
        if (peek(lx, 0) == ops[i].s[0] && (n == 1 || peek(lx, 1) == ops[i].s[1])) {
            while (n--)
                bump(lx);
            return ops[i].k;
        }
    }
    bump(lx);
    return TOK_ERROR;
}

Token fe_lex_next(Lexer *lx)
{
    skip_blanks(lx);
    Token t = {.loc = {lx->line, lx->col}, .text = lx->p};
    int c = peek(lx, 0);
    if (c < 0) {
        t.kind = TOK_EOF;
    } else if (c == '\n') {
        t.kind = TOK_NEWLINE;
        while (peek(lx, 0) == '\n') {
            bump(lx);
            skip_blanks(lx);
        }
        t.len = 1;
        return t;
    } else if (is_alpha(c)) {
        while (is_alnum(peek(lx, 0)))
            bump(lx);
        t.len = (int)(lx->p - t.text);
        t.kind = keyword(t.text, t.len);
    } else if (is_digit(c) || (c == '.' && is_digit(peek(lx, 1)))) {
        return number(lx, t);
    } else if (c == '"') { /* a string: no escapes, on one line; text is its inside */
        bump(lx);
        while (peek(lx, 0) >= 0 && peek(lx, 0) != '"' && peek(lx, 0) != '\n')
            bump(lx);
        if (peek(lx, 0) != '"') {
            t.kind = TOK_ERROR;
            t.err = LEX_BADSTRING;
            t.len = (int)(lx->p - t.text);
            return t;
        }
        bump(lx);
        t.kind = TOK_STRING;
        t.text = ir_arena_strndup(lx->arena, t.text + 1, (size_t)(lx->p - t.text - 2));
        t.len = (int)strlen(t.text);
        return t;
    } else if (lx->end - lx->p >= 3 && !memcmp(lx->p, bom, 3)) {
        for (int i = 0; i < 3; i++)
            bump(lx);
        t.kind = TOK_ERROR;
        t.err = LEX_BOM;
    } else {
        t.kind = punct(lx);
        t.err = t.kind == TOK_ERROR ? LEX_BADCHAR : LEX_OK;
    }
    t.len = (int)(lx->p - t.text);
    return t;
}

void fe_lex_report(DiagList *d, const Token *t)
{
    int c = t->len ? (unsigned char)t->text[0] : 0;
    switch (t->err) {
    case LEX_BADCHAR:
        if (c >= 0x20 && c < 0x7f)
            ir_diag(d, t->loc, "unexpected character '%c'", c);
        else
            ir_diag(d, t->loc, "unexpected byte 0x%02x", c);
        break;
    case LEX_BADNUM:
        ir_diag(d, t->loc, "malformed number '%.*s%s'", t->len > 40 ? 40 : t->len,
                t->text, t->len > 40 ? "..." : "");
        break;
    case LEX_BOM:
        ir_diag(d, t->loc, "unexpected byte-order mark (bytes ef bb bf): only the file may "
                           "start with one");
        break;
    case LEX_BIGINT:
    case LEX_BIGFLOAT:
        ir_diag(d, t->loc, "%s literal '%.*s%s' is too large", t->err == LEX_BIGINT ? "integer" : "float",
                t->len > 40 ? 40 : t->len, t->text, t->len > 40 ? "..." : "");
        break;
    case LEX_BADSTRING:
        ir_diag(d, t->loc, "string not closed on its line: '%.*s%s'", t->len > 40 ? 40 : t->len,
                t->text, t->len > 40 ? "..." : "");
        break;
    case LEX_OK: IR_UNREACHABLE();
    }
}
