/* carbon's plaintext protocol, `name value timestamp\n`, decoded in one pass over a read.
 *
 * The receiver's only plaintext decoder (lines.py wraps it). Its rules are those of
 * splitting the read on b"\n", each line with bytes.split() (whitespace: space, \t, \n,
 * \v, \f, \r), the name decoded as UTF-8 and the two numbers with float(): blank lines are
 * ignored; a line that does not hold exactly three fields, whose name is not UTF-8 or
 * whose value or timestamp float() refuses is refused with the reason, and the other
 * lines of the read are kept. Numbers are parsed by CPython's own PyOS_string_to_double,
 * which float() calls on a field without underscores; a field with an underscore (PEP 515
 * spelling) goes to float() itself. The data must be a bytes object: CPython ends its
 * buffer with a NUL byte, so the parser's look-ahead never reads past it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SAMPLES 5 /* refused lines returned with their reason (the others only counted) */

static inline int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static const double POWERS_OF_TEN[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

/* The usual spelling, [+-]digits[.digits] with at most 15 digits, parsed exactly: the
 * digits as an integer and the power of ten are both exact doubles, so one division
 * gives the correctly rounded value, as float() does (Clinger's fast path). 1 with *out
 * set, or 0 for any other spelling (left to float()'s parser). */
static int parse_usual_number(const char *start, const char *end, double *out)
{
    const char *p = start;
    int negative = 0, digits = 0, decimals = 0, point = 0;
    uint64_t mantissa = 0;
    if (p < end && (*p == '-' || *p == '+'))
        negative = *p++ == '-';
    for (; p < end; p++) {
        unsigned digit = (unsigned char)*p - '0';
        if (digit < 10) {
            if (++digits > 15)
                return 0;
            mantissa = mantissa * 10 + digit;
            decimals += point;
        }
        else if (*p == '.' && !point)
            point = 1;
        else
            return 0;
    }
    if (digits == 0)
        return 0;
    double number = (double)mantissa / POWERS_OF_TEN[decimals];
    *out = negative ? -number : number;
    return 1;
}

/* float() of the field [start, end): 0 with *out set; 1 where float() raises ValueError
 * (nothing left raised); -1 on another error (raised). */
static int parse_number(const char *start, const char *end, double *out)
{
    if (parse_usual_number(start, end, out))
        return 0;
    if (memchr(start, '_', end - start) != NULL) {
        PyObject *field = PyBytes_FromStringAndSize(start, end - start);
        if (field == NULL)
            return -1;
        PyObject *number = PyFloat_FromString(field);
        Py_DECREF(field);
        if (number == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))
                return -1;
            PyErr_Clear();
            return 1;
        }
        *out = PyFloat_AS_DOUBLE(number);
        Py_DECREF(number);
        return 0;
    }
    char *stop;
    double number = PyOS_string_to_double(start, &stop, NULL);
    if (stop != end || (number == -1.0 && PyErr_Occurred())) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))
                return -1;
            PyErr_Clear();
        }
        return 1;
    }
    *out = number;
    return 0;
}

/* Count a refused line; keep it with its reason while fewer than SAMPLES are kept. */
static int refuse(PyObject *samples, Py_ssize_t *refused, PyObject *reason, const char *line, Py_ssize_t length)
{
    (*refused)++;
    if (reason == NULL)
        return -1;
    int result = 0;
    if (PyList_GET_SIZE(samples) < SAMPLES) {
        PyObject *sample = Py_BuildValue("(Oy#)", reason, line, length);
        result = sample == NULL ? -1 : PyList_Append(samples, sample);
        Py_XDECREF(sample);
    }
    Py_DECREF(reason);
    return result;
}

/* The name [start, end) as str; NULL with *bad_byte >= 0 where it is not UTF-8 (nothing
 * left raised), NULL with *bad_byte < 0 on another error (raised). */
static PyObject *decode_name(const char *start, const char *end, Py_ssize_t *bad_byte)
{
    *bad_byte = -1;
    PyObject *name = PyUnicode_DecodeUTF8(start, end - start, NULL);
    if (name == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        Py_ssize_t position = 0;
        if (value != NULL && PyUnicodeDecodeError_GetStart(value, &position) == 0)
            *bad_byte = position;
        else
            PyErr_Clear();
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        if (*bad_byte < 0)
            *bad_byte = 0;
    }
    return name;
}

PyDoc_STRVAR(decode_doc,
"decode(data: bytes) -> (names, timestamps, values, refused, samples)\n\n"
"The points of data's complete plaintext lines (a last line without a newline counts):\n"
"names a list of str, timestamps and values bytearrays of native float64 (the first\n"
"len(names) of each are used), refused the number of refused lines, samples up to 5\n"
"(reason, line) of them.");

static PyObject *decode(PyObject *module, PyObject *arg)
{
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "decode() takes bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(arg);
    const char *data_end = data + PyBytes_GET_SIZE(arg);
    Py_ssize_t most = 1;
    for (const char *p = data; (p = memchr(p, '\n', data_end - p)) != NULL; p++)
        most++;
    PyObject *names = PyList_New(most);
    PyObject *timestamps = PyByteArray_FromStringAndSize(NULL, most * (Py_ssize_t)sizeof(double));
    PyObject *values = PyByteArray_FromStringAndSize(NULL, most * (Py_ssize_t)sizeof(double));
    PyObject *samples = PyList_New(0);
    if (names == NULL || timestamps == NULL || values == NULL || samples == NULL)
        goto error;
    double *timestamp_out = (double *)PyByteArray_AS_STRING(timestamps);
    double *value_out = (double *)PyByteArray_AS_STRING(values);
    Py_ssize_t count = 0, refused = 0;
    const char *line = data;
    while (line < data_end) {
        const char *newline = memchr(line, '\n', data_end - line);
        const char *line_end = newline != NULL ? newline : data_end;
        const char *starts[3], *ends[3];
        Py_ssize_t fields = 0;
        const char *p = line;
        for (;;) {
            while (p < line_end && is_space((unsigned char)*p))
                p++;
            if (p == line_end)
                break;
            const char *start = p;
            while (p < line_end && !is_space((unsigned char)*p))
                p++;
            if (fields < 3) {
                starts[fields] = start;
                ends[fields] = p;
            }
            fields++;
        }
        if (fields == 3) {
            Py_ssize_t bad_byte;
            double value, timestamp;
            PyObject *name = decode_name(starts[0], ends[0], &bad_byte);
            if (name == NULL) {
                if (bad_byte < 0)
                    goto error;
                if (refuse(samples, &refused, PyUnicode_FromFormat("byte %zd of the name is not UTF-8", bad_byte),
                           line, line_end - line) < 0)
                    goto error;
            }
            else {
                int parsed = parse_number(starts[1], ends[1], &value);
                if (parsed == 0)
                    parsed = parse_number(starts[2], ends[2], &timestamp);
                if (parsed != 0) {
                    Py_DECREF(name);
                    if (parsed < 0)
                        goto error;
                    if (refuse(samples, &refused, PyUnicode_FromString("value or timestamp is not a number"),
                               line, line_end - line) < 0)
                        goto error;
                }
                else {
                    PyList_SET_ITEM(names, count, name);
                    timestamp_out[count] = timestamp;
                    value_out[count] = value;
                    count++;
                }
            }
        }
        else if (fields != 0) {
            if (refuse(samples, &refused,
                       PyUnicode_FromFormat("expected 'name value timestamp', got %zd fields", fields),
                       line, line_end - line) < 0)
                goto error;
        }
        line = newline != NULL ? newline + 1 : data_end;
    }
    if (count < most && PyList_SetSlice(names, count, most, NULL) < 0)
        goto error;
    return Py_BuildValue("(NNNnN)", names, timestamps, values, refused, samples);

error:
    Py_XDECREF(names);
    Py_XDECREF(timestamps);
    Py_XDECREF(values);
    Py_XDECREF(samples);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_O, decode_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_plaintext", "carbon's plaintext protocol, decoded in C (see lines.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__plaintext(void) { return PyModule_Create(&module); }
