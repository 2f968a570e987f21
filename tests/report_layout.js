// report_layout.js: checks the layout of a tfrun --report page in the browser.
//
// tests/report.sh appends this script to a copy of a report and opens it in
// headless Chromium (tests/playground_driver.js, every page in one browser);
// it runs after the report's own scripts, writes its findings into a <pre>
// element with the id "layout", one a line, and then sets <body
// data-state="done"> (what the driver waits for):
//
//   height N             the page's height as it opens
//   heads L:N,L:N,...    head thumbnails per layer of the model view
//   links N              in-page links checked (all have a target)
//   compare A:N B:N matrix RxC   a --compare page: heads per model, the
//                        similarity matrix's rows and columns
//   labels N             picture labels checked
//   FAIL: ...            anything wrong (the shell test fails on any)
//
// What it checks, with bounding boxes as laid out:
// - within each picture (svg.hm), no two text boxes overlap and every text
//   lies inside the picture;
// - the model view has one thumbnail per head of every attention layer (the
//   shell compares the counts with tfinfo), a layer's thumbnails on one row,
//   no two thumbnails or layer cards overlapping, each linking to its layer,
//   each with a caption (its op's name and line) under it, inside its card,
//   no two captions overlapping;
// - every in-page link (table of contents, model view, program view, layer
//   table) has a target; the program view's layer links land on sections of
//   layers compiled from that line (a layer of several ops lists every op's
//   line in data-lines), its head links on heads compiled from that line,
//   its hidden-unit links on layers of that line, and every layer is linked
//   from each line it holds an op of;
// - the table of contents lists every layer section;
// - a --compare page (body data-page="compare") has no model view but a
//   summary, the similarity matrix, the best-match tables and both models'
//   columns, each laid out (not empty), no two overlapping; the matrix has a
//   best-match outline per row; every picture of a model lies inside its
//   column.
(function () {
    var fails = [], out = [];
    function fail(s) { if (fails.length < 20) fails.push('FAIL: ' + s); }
    function box(e) { return e.getBoundingClientRect(); }
    function overlap(a, b) {
        var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        return w > 0.5 && h > 0.5;
    }
    function text(e) { return JSON.stringify(e.textContent.slice(0, 40)); }
    function target(a) { return document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1))); }
    var sections = document.querySelectorAll('details.layer');
    // The source lines a layer section (or a head's figure) computes.
    function lines(e) { return (e.dataset.lines || e.dataset.line || '').split(' '); }

    // The page as it opens; then every section open, so that every picture is laid out.
    out.push('height ' + document.documentElement.scrollHeight);
    sections.forEach(function (d) { d.open = true; });

    // Labels in every picture.
    var n_labels = 0;
    document.querySelectorAll('svg.hm').forEach(function (svg) {
        var sb = box(svg), texts = Array.prototype.slice.call(svg.querySelectorAll('text'));
        var name = svg.querySelector('title') ? svg.querySelector('title').textContent : 'a picture';
        var bs = texts.map(box);
        for (var i = 0; i < texts.length; i++) {
            n_labels++;
            var b = bs[i];
            if (!(b.width > 0) || b.left < sb.left - 0.5 || b.right > sb.right + 0.5 ||
                b.top < sb.top - 0.5 || b.bottom > sb.bottom + 0.5)
                fail('label ' + text(texts[i]) + ' sticks out of ' + name);
            for (var j = 0; j < i; j++)
                if (overlap(b, bs[j]))
                    fail('labels ' + text(texts[j]) + ' and ' + text(texts[i]) + ' overlap in ' + name);
        }
    });
    out.push('labels ' + n_labels);

    // A comparison page.
    var compare = document.body.dataset.page === 'compare';
    if (compare) {
        var ids = ['summary', 'similarity', 'best', 'model-a', 'model-b'], parts = [];
        ids.forEach(function (id) {
            var e = document.getElementById(id);
            if (!e) { fail('no #' + id); return; }
            var b = box(e);
            if (!(b.width > 0 && b.height > 0)) fail('#' + id + ' is not laid out');
            parts.forEach(function (p) { if (overlap(b, p.b)) fail('#' + p.id + ' and #' + id + ' overlap'); });
            parts.push({id: id, b: b});
        });
        var sim = document.querySelector('#similarity svg.hm[data-kind=sim]');
        if (!sim) {
            fail('no similarity matrix');
        } else {
            var rows = +sim.dataset.rows, cols = +sim.dataset.cols, sb = box(sim);
            if (!(sb.width > 0 && sb.height > 0)) fail('the similarity matrix is not laid out');
            if (sim.querySelectorAll('rect.best').length !== rows) fail('the matrix has ' + sim.querySelectorAll('rect.best').length + ' best-match outlines for ' + rows + ' rows');
            var na = document.querySelectorAll('#model-a svg.hm[data-kind=att]').length;
            var nb = document.querySelectorAll('#model-b svg.hm[data-kind=att]').length;
            if (na !== rows || nb !== cols) fail('the matrix is ' + rows + 'x' + cols + ' for ' + na + ' and ' + nb + ' attention maps');
            out.push('compare A:' + na + ' B:' + nb + ' matrix ' + rows + 'x' + cols);
        }
        ['a', 'b'].forEach(function (m) {
            var col = document.getElementById('model-' + m);
            if (!col) return;
            var cb = box(col);
            col.querySelectorAll('svg.hm').forEach(function (svg) {
                var b = box(svg);
                if (b.left < cb.left - 0.5 || b.right > cb.right + 0.5) fail('a picture of ' + m.toUpperCase() + ' sticks out of its column');
            });
        });
    }

    // The model view.
    var mv = document.getElementById('model-view');
    if (compare) {
        if (mv) fail('a model view in a comparison');
    } else if (!mv) {
        fail('no model view');
    } else {
        var cards = Array.prototype.slice.call(mv.querySelectorAll('.mv-layer')), heads = [], caps = [];
        var all = Array.prototype.slice.call(mv.querySelectorAll('svg.thumb'));
        cards.forEach(function (card, i) {
            var l = card.dataset.layer, thumbs = card.querySelectorAll('svg.thumb'), cb = box(card);
            heads.push(l + ':' + thumbs.length);
            for (var j = 0; j < i; j++)
                if (overlap(cb, box(cards[j]))) fail('model view: layers ' + cards[j].dataset.layer + ' and ' + l + ' overlap');
            thumbs.forEach(function (t, h) {
                var tb = box(t);
                if (!(tb.width >= 16 && tb.height >= 16)) fail('model view: layer ' + l + ' head ' + h + ' is ' + tb.width + 'x' + tb.height);
                if (Math.abs(tb.top - box(thumbs[0]).top) > 0.5) fail('model view: layer ' + l + "'s heads are not on one row");
                if (tb.left < cb.left || tb.right > cb.right || tb.bottom > cb.bottom) fail('model view: layer ' + l + ' head ' + h + ' outside its card');
                if (+t.dataset.layer !== +l || +t.dataset.head !== h) fail('model view: layer ' + l + ' holds a thumbnail of ' + t.dataset.layer + '/' + t.dataset.head);
                var a = t.closest('a');
                if (!a || a.getAttribute('href') !== '#layer-' + l || !target(a)) fail('model view: layer ' + l + ' head ' + h + ' does not link to its layer');
                var cap = a && a.querySelector('.mv-cap');
                if (!cap || !cap.textContent) {
                    fail('model view: layer ' + l + ' head ' + h + ' has no caption');
                } else {
                    var pb = box(cap);
                    if (!(pb.height > 0) || pb.top < tb.bottom - 0.5 || pb.left < cb.left - 0.5 || pb.right > cb.right + 0.5 || pb.bottom > cb.bottom + 0.5)
                        fail('model view: layer ' + l + ' head ' + h + "'s caption is not under it inside its card");
                    caps.forEach(function (o) { if (overlap(pb, o.b)) fail('model view: the captions of ' + o.id + ' and ' + l + '/' + h + ' overlap'); });
                    caps.push({id: l + '/' + h, b: pb});
                }
            });
        });
        for (var i = 0; i < all.length; i++)
            for (var j = 0; j < i; j++)
                if (overlap(box(all[i]), box(all[j]))) fail('model view: thumbnails overlap');
        out.push('heads ' + heads.join(','));
    }

    // Every in-page link has a target.
    var links = document.querySelectorAll('a[href^="#"]'), n_links = 0;
    links.forEach(function (a) {
        n_links++;
        if (!target(a)) fail('link ' + a.getAttribute('href') + ' (' + text(a) + ') has no target');
    });
    out.push('links ' + n_links);

    // The program view: layer links land on layers of their line.
    var prog = document.getElementById('program'), linked = {};
    if (prog) {
        prog.querySelectorAll('tr').forEach(function (tr) {
            var line = tr.dataset.line;
            tr.querySelectorAll('a.ly').forEach(function (a) {
                var t = target(a);
                if (!t || t.tagName !== 'DETAILS' || lines(t).indexOf(line) < 0)
                    fail('program line ' + line + ': ' + a.getAttribute('href') + ' is not a layer of that line');
                else
                    linked[t.dataset.layer + '/' + line] = 1;
            });
            tr.querySelectorAll('a.hd').forEach(function (a) {
                var t = target(a), sec = t && t.closest('details.layer');
                if (!sec || lines(sec).indexOf(line) < 0 || t.dataset.line !== line) fail('program line ' + line + ': ' + a.getAttribute('href') + ' is not a head of that line');
            });
            tr.querySelectorAll('a.un').forEach(function (a) {
                var t = target(a);
                if (!t || t.tagName !== 'DETAILS' || !t.dataset.lines || lines(t).indexOf(line) < 0)
                    fail('program line ' + line + ': ' + a.getAttribute('href') + ' is not an MLP holding an op of that line');
            });
        });
        sections.forEach(function (d) {
            lines(d).forEach(function (line) {
                if (+line > 0 && !linked[d.dataset.layer + '/' + line]) fail('layer ' + d.dataset.layer + ' (line ' + line + ') is not linked from the program view');
            });
        });
    }

    // The table of contents lists every section.
    var toc = document.querySelectorAll('nav#toc a[href^="#layer-"], nav#toc a[href="#embedding"]');
    if (toc.length !== sections.length) fail('the contents list ' + toc.length + ' of ' + sections.length + ' sections');

    var pre = document.createElement('pre');
    pre.id = 'layout';
    pre.textContent = out.concat(fails).join('\n');
    document.body.appendChild(pre);
    document.body.dataset.state = 'done';
})();
